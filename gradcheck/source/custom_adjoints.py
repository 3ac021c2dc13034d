"""The adjoints a kernel's author wrote: ``@wp.func_grad`` and ``@wp.func_native`` adjoint snippets in the
``@wp.func`` functions it calls (followed through the functions they call).

A launch whose adjoint disagrees with its own finite differences is a bug when Warp generated the adjoint; when the
author wrote it, it may be meant: a straight-through estimator (a step's derivative replaced by 1), a gradient
reversal, a clipped or scaled gradient, or a test of Warp's custom-gradient mechanism itself (Warp's own
``test_grad_customs`` registers adjoints unrelated to their functions and checks that they are used). So
adjoint-mismatch needs to know which launches run a hand-written adjoint (see its rules).
"""

from __future__ import annotations

import ast
import functools


def custom_adjoints(kernel) -> tuple[str, ...]:
    """Names of the functions with a hand-written adjoint the kernel reaches (empty when none, or when its source
    cannot be read)."""
    func = getattr(kernel, "func", None)
    if func is None:
        return ()
    try:
        return _custom(func)
    except TypeError:  # an unhashable function object
        return ()


@functools.cache
def _custom(func) -> tuple[str, ...]:
    from gradcheck.source.kernel_patterns import parse_source, resolve_name

    found: list[str] = []
    seen = {getattr(func, "__code__", func)}
    queue = [parse_source(func)]
    while queue:
        src = queue.pop(0)
        if src is None:
            continue
        for node in ast.walk(src.node):
            if not isinstance(node, ast.Call):
                continue
            target = resolve_name(node.func, src)
            python = getattr(target, "func", None)
            if target is None or python is None or _builtin(target):
                continue
            name = ast.unparse(node.func)
            if _hand_written(target) and name not in found:
                found.append(name)
            key = getattr(python, "__code__", python)
            if key not in seen and hasattr(python, "__code__"):
                seen.add(key)
                queue.append(parse_source(python))
    return tuple(found)


def _hand_written(function) -> bool:
    """A Warp Function (or one of its overloads) with a ``@wp.func_grad`` or a native adjoint snippet."""
    candidates = [function, *(getattr(function, "user_overloads", None) or {}).values()]
    return any(
        getattr(f, "custom_grad_func", None) is not None or getattr(f, "adj_native_snippet", None) for f in candidates
    )


def _builtin(target) -> bool:
    try:
        return bool(target.is_builtin())
    except Exception:  # noqa: BLE001 - not a Warp Function
        return False
