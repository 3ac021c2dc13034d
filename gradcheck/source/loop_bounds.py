"""Loops whose trip count a kernel reads at run time, and whether a launch makes them iterate more than once.

Warp differentiates a loop whose bound is known only at run time (a kernel argument, a struct field,
``arr.shape[0]``) as a dynamic loop, and that is where its wrong adjoints live (nested dynamic loops give 2x,
NVIDIA/warp#1293; a value set before the loop and used after it gets a zero adjoint, #1694 and the #729 family;
``continue`` in a loop, #1552). Every one of them is invisible while the loop runs at most once: a kernel first
launched with ``num_lights = 1`` passes any test, and is wrong from the launch where it is 2. So the default
adjoint test (gradcheck.observe.kernel_tests) tests a kernel again when one of its run-time loops goes from <= 1
to > 1 iterations; this module says, for one launch, which loops iterate more than once.

Only bounds computable from the launch's own arguments are read: names of scalar arguments, struct fields
(``params.count``), ``arr.shape[k]``, ``len(arr)`` and integer arithmetic of those. A bound read from an array
element (``offsets[tid + 1]``) differs per thread and is not known at launch time: such loops are not followed.
"""

from __future__ import annotations

import ast
import functools


@functools.cache
def _bounds_of(func) -> tuple[tuple[ast.expr, ...], ...]:
    """The range() arguments of each run-time-bound loop in the function's own body."""
    from gradcheck.source.kernel_patterns import dynamic_loop_reason, parse_source

    src = parse_source(func)
    if src is None:
        return ()
    found = []
    for node in ast.walk(src.node):
        if not isinstance(node, ast.For):
            continue
        why = dynamic_loop_reason(node, src, max_unroll=1 << 30)
        it = node.iter
        is_range = isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
        if why == "trip count known only at run time" and is_range:
            found.append(tuple(it.args))
    return tuple(found)


def runtime_loops(kernel) -> int:
    """How many run-time-bound ``range`` loops the kernel's own body holds (0 when its source cannot be read)."""
    func = getattr(kernel, "func", None)
    if func is None:
        return 0
    try:
        return len(_bounds_of(func))
    except TypeError:  # an unhashable function object: not followed
        return 0


def loops_iterating(kernel, names: list[str], values: list) -> tuple[bool | None, ...]:
    """For each run-time loop of the kernel: True when this launch's arguments make it iterate more than once,
    False when at most once, None when its bound cannot be computed from the arguments."""
    func = getattr(kernel, "func", None)
    if func is None or not runtime_loops(kernel):
        return ()
    scope = dict(zip(names, values))
    out = []
    for args in _bounds_of(func):
        bounds = [_evaluate(arg, scope) for arg in args]
        if any(b is None for b in bounds):
            out.append(None)
            continue
        try:
            out.append(len(range(*bounds)) > 1)
        except (TypeError, ValueError):
            out.append(None)
    return tuple(out)


def _plain(value):
    """An int for Warp's and numpy's integer scalars (``wp.int32(3)``, ``np.int64(3)``); anything else as is."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) or value is None:
        return value
    inner = getattr(value, "value", None)
    if isinstance(inner, int) and not isinstance(inner, bool):
        return inner
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        item = value.item()
        return item if isinstance(item, int) else None
    return value


_OPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b if b else None,
    ast.Mod: lambda a, b: a % b if b else None,
}


def _evaluate(node: ast.expr, scope: dict):
    """An integer bound from the launch's arguments; None when it needs anything else."""
    value = _value(node, scope)
    try:
        return int(value) if value is not None and float(value).is_integer() else None
    except (TypeError, ValueError, OverflowError):
        return None


def _value(node: ast.expr, scope: dict):
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, int) and not isinstance(node.value, bool) else None
    if isinstance(node, ast.Name):
        return _plain(scope.get(node.id))
    if isinstance(node, ast.Attribute):
        base = _value(node.value, scope)
        return _plain(getattr(base, node.attr, None)) if base is not None else None
    if isinstance(node, ast.Subscript):
        base, index = _value(node.value, scope), _value(node.slice, scope)
        if isinstance(base, tuple) and isinstance(index, int) and -len(base) <= index < len(base):
            return base[index]
        return None
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _value(node.left, scope), _value(node.right, scope)
        if isinstance(left, int) and isinstance(right, int):
            return _OPS[type(node.op)](left, right)
        return None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("len", "int"):
        if len(node.args) != 1:
            return None
        inner = _value(node.args[0], scope)
        if node.func.id == "int":
            return inner if isinstance(inner, int) else None
        shape = getattr(inner, "shape", None)
        return shape[0] if shape else None
    return None
