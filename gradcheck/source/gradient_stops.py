"""Where a kernel cuts its gradient on purpose or by accident: builtins that map a float to a step (no adjoint) and
casts to an integer type. gradcheck.diagnose.chain_break names them at a launch that passes a zero gradient on the
chain from a param to the loss (index arithmetic uses them legitimately, so never on their own).
"""

from __future__ import annotations

import ast

from gradcheck.source.kernel_patterns import called_functions, clip, parse_source, resolve_name

# Builtins that turn a float into a step (Warp gives them no adjoint: ``is_differentiable=False``) and casts to an
# integer: a value that goes through one carries no gradient. Index arithmetic uses them legitimately, so they are
# named only for a launch already shown to pass a zero gradient on the chain from a param to the loss.
_STEP_BUILTINS = ("floor", "ceil", "round", "rint", "trunc", "frac", "sign", "step", "floordiv")
_INT_CASTS = ("int", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def gradient_stops(kernel) -> tuple[tuple[str, str | None], ...]:
    """(call as written, file:line) of every call in the kernel (and the ``@wp.func`` functions it calls) to a
    builtin without an adjoint that maps a float to a step, or a cast to an integer type."""
    func = getattr(kernel, "func", None)
    if func is None:
        return ()
    found: list[tuple[str, str | None]] = []
    try:
        _stops(func, found, depth=0)
    except Exception:  # a diagnosis must never fail on a source it cannot read
        return tuple(found)
    return tuple(dict.fromkeys(found))


def _stops(func, found: list, depth: int) -> None:
    src = parse_source(func)
    if src is None or depth > 4:
        return
    for node in ast.walk(src.node):
        if not isinstance(node, ast.Call):
            continue
        name = ast.unparse(node.func).rsplit(".", 1)[-1]
        target = resolve_name(node.func, src)
        builtin = name in _STEP_BUILTINS and getattr(target, "is_differentiable", None) is False
        cast = name in _INT_CASTS and (target is None or isinstance(target, type))
        if builtin or cast:
            found.append((clip(ast.unparse(node)), src.where(node)))
    for _name, called in called_functions(src):
        _stops(called, found, depth + 1)
