"""Does the code that reads a gradient take differences of the values it read? (``row = g - prev``)

A Jacobian taken row by row without a zero between the rows reads running sums: row i read after backward i holds
rows 0..i. A program may do that on purpose and recover each row as the difference of two consecutive reads
(``row = g - prev``, ``np.diff(sums, axis=0)``). Both look the same to Warp: the same backwards, the same reads, the
same buffer. What tells them apart is what the program does with the value, so this module reads the program's
source around the read: the enclosing function (or the module, for top-level code) is parsed, the names the value
read flows into are followed (assignments, ``list.append``, augmented assignments), and the answer is whether two
of them meet in a subtraction (``a - b``, ``a -= b``, ``np.subtract(a, b)``), or a sequence of them in
``np.diff``. Differences of the read against anything else (``row - expected`` in a test) are not this: those
rows are still the wrong ones.

For a kernel that loads the gradient (a launch reads it), the kernel's own syntax tree is asked whether it subtracts
from the gradient argument's values: a kernel cannot be followed from one launch to the next, so one operand is
enough there.

The answer is ``None`` when the source cannot be read (a program from ``<stdin>``, a file gone or changed): the
caller says no verdict rather than guess.
"""

from __future__ import annotations

import ast
import functools
import linecache
import os

_DIFFERENCE_CALLS = {"diff", "subtract"}
_READ_CALLS = {"numpy", "copy", "assign", "launch", "to_torch", "array", "list", "tolist", "item"}


def reads_take_differences(site: str | None) -> bool | None:
    """True: the value read at ``site`` (``/path/file.py:LINE``, a host read or a copy) is subtracted from another
    read of it, or differenced with ``np.diff``; False: it is not; None: the source cannot be read."""
    located = _locate(site)
    if located is None:
        return None
    tree, scope, line = located
    statement = _statement_at(scope, line)
    if statement is None:
        return None
    derived = _flow(scope, statement)
    return _differences(scope, derived) or _elsewhere(tree, scope, derived, DEPTH)


DEPTH = 3  # calls followed from the reading code: a helper that takes the rows, one that returns them


def _elsewhere(tree, scope, derived: _Derived, depth: int) -> bool:
    """The reads flow out of ``scope`` into a function of the same module (``J = rows_from_running_sum(reads)``) or
    back to its callers (``return rows``): followed there, the differences may be taken in that code."""
    if depth <= 0:
        return False
    functions = {f.name: f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for node in ast.walk(scope):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.func.id not in functions:
            continue
        callee = functions[node.func.id]
        names = [a.arg for a in callee.args.posonlyargs + callee.args.args]
        passed = {names[i] for i, a in enumerate(node.args) if i < len(names) and derived.mentions(a)}
        passed |= {k.arg for k in node.keywords if k.arg in names and derived.mentions(k.value)}
        if passed and callee is not scope and _followed(tree, callee, _Derived(passed), depth):
            return True
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
        isinstance(n, ast.Return) and n.value is not None and derived.mentions(n.value) for n in ast.walk(scope)
    ):
        for node in ast.walk(tree):  # the calls of this function: what their results are bound to, there
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == scope.name:
                outer = _scope_of(tree, node.lineno)
                if outer is not scope and _followed(tree, outer, _Derived(set(), {id(node)}), depth):
                    return True
    return False


def _followed(tree, scope, derived: _Derived, depth: int) -> bool:
    _propagate(scope, derived)
    return _differences(scope, derived) or _elsewhere(tree, scope, derived, depth - 1)


def kernel_subtracts(function: ast.FunctionDef | None, argument: str) -> bool | None:
    """True: the kernel ``function`` subtracts with a value it loads from ``argument`` as an operand; None: no
    syntax tree to read."""
    if function is None:
        return None
    derived = _Derived({argument})
    _propagate(function, derived)
    return any(derived.mentions(a) or derived.mentions(b) for a, b in _subtractions(function))


# -- locating the read --------------------------------------------------------------------------------------------
def _locate(site: str | None):
    if not site:
        return None
    path, colon, line = str(site).rpartition(":")
    if not colon or not line.isdigit() or not path or path.startswith("<"):
        return None
    tree = _parsed(path, _stamp(path))
    if tree is None:
        return None
    number = int(line)
    return tree, _scope_of(tree, number), number


def _stamp(path: str) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


@functools.lru_cache(maxsize=64)
def _parsed(path: str, stamp: float | None):
    """The module's syntax tree (cached while the file is unchanged); None when it cannot be read or parsed."""
    if stamp is None:
        return None
    linecache.checkcache(path)
    source = "".join(linecache.getlines(path))
    if not source:
        return None
    try:
        return ast.parse(source, filename=path)
    except (SyntaxError, ValueError):
        return None


def _scope_of(tree: ast.Module, line: int):
    """The innermost function containing ``line``, or the module."""
    scope = tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _spans(node, line):
            if scope is tree or node.lineno >= scope.lineno:
                scope = node
    return scope


def _spans(node, line: int) -> bool:
    return node.lineno <= line <= (getattr(node, "end_lineno", None) or node.lineno)


def _statement_at(scope, line: int):
    """The innermost statement of ``scope`` spanning ``line`` (a compound statement's body is searched first)."""
    found = None
    for node in ast.walk(scope):
        if isinstance(node, ast.stmt) and node is not scope and _spans(node, line):
            if found is None or node.lineno >= found.lineno and _width(node) <= _width(found):
                found = node
    return found


def _width(node) -> int:
    return (getattr(node, "end_lineno", None) or node.lineno) - node.lineno


# -- following the value read -------------------------------------------------------------------------------------
class _Derived:
    """Names (``g``, ``rows``, ``self.prev``) holding a value read, or built from one; ``roots``: the read's own
    expression nodes (the statement at the read, when it binds nothing)."""

    def __init__(self, names: set[str], roots: set[int] | None = None) -> None:
        self.names, self.roots = set(names), set(roots or ())

    def mentions(self, node) -> bool:
        for sub in ast.walk(node):
            if id(sub) in self.roots:
                return True
            name = _dotted(sub)
            if name is not None and name in self.names:
                return True
        return False

    def add(self, target) -> bool:
        """Mark what ``target`` (an assignment target) binds; True when it is new."""
        before = len(self.names)
        for sub in _bound(target):
            self.names.add(sub)
        return len(self.names) != before


def _dotted(node) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base is not None else None
    return None


def _bound(target):
    """The names an assignment to ``target`` binds (``rows[i] = v`` binds into ``rows``)."""
    if isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _bound(element)
    elif isinstance(target, ast.Starred):
        yield from _bound(target.value)
    elif isinstance(target, ast.Subscript):
        yield from _bound(target.value)
    else:
        name = _dotted(target)
        if name is not None:
            yield name


def _flow(scope, statement) -> _Derived:
    """What the value read at ``statement`` flows into, within ``scope`` (flow-insensitive, to a fixed point)."""
    derived = _Derived(set())
    reads = [n for n in ast.walk(statement) if isinstance(n, ast.Call) and _called(n) in _READ_CALLS]
    derived.roots = {id(n) for n in reads} or {id(statement)}
    _propagate(scope, derived)
    return derived


def _called(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def _propagate(scope, derived: _Derived) -> None:
    for _ in range(8):  # a chain g -> row -> rows -> J is a few steps long
        changed = False
        for node in ast.walk(scope):
            if isinstance(node, ast.Assign) and derived.mentions(node.value):
                changed |= any(derived.add(t) for t in node.targets)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
                if derived.mentions(node.value):
                    changed |= derived.add(node.target)
            elif isinstance(node, (ast.For, ast.comprehension)) and derived.mentions(node.iter):
                changed |= derived.add(node.target)
            elif isinstance(node, ast.Call) and _called(node) in ("append", "extend", "insert"):
                if isinstance(node.func, ast.Attribute) and any(derived.mentions(a) for a in node.args):
                    changed |= derived.add(node.func.value)
        if not changed:
            return


def _differences(scope, derived: _Derived) -> bool:
    """Two values derived from the reads meet in a subtraction, or a sequence of them is differenced."""
    if any(derived.mentions(a) and derived.mentions(b) for a, b in _subtractions(scope)):
        return True
    for node in ast.walk(scope):
        if isinstance(node, ast.Call) and _called(node) in _DIFFERENCE_CALLS:
            operands = [a for a in node.args if derived.mentions(a)]
            if len(operands) >= 2 or (_called(node) == "diff" and operands):
                return True
    return False


def _subtractions(scope):
    """(minuend, subtrahend) of every ``a - b`` and ``a -= b`` in ``scope``."""
    for node in ast.walk(scope):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
            yield node.left, node.right
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Sub):
            yield node.target, node.value
