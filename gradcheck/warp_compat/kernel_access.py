"""Which arguments a kernel reads the values of, and which it writes: read off the kernel's syntax tree.

Warp's backward replays each launch's forward code from the arrays' contents at backward time. A later launch
that rewrites an array therefore hurts an earlier launch's gradient only when the earlier one *reads* the array's
values; a launch that only accumulates into it (``wp.atomic_add(loss, 0, v)``, ``loss[0] += v``) or only stores
into it never needs them back. Warp tracks this itself only in modules built with
``wp.config.verify_autograd_array_access`` (and only from 1.19's codegen); this reads the same off the kernel's
Python source, which every release keeps (``kernel.adj.tree``), and follows calls into the user's ``@wp.func``s.

Conservative by construction: a use it cannot classify (an array passed to a builtin or a function it cannot
resolve, aliased to a local, returned) counts as a read and a write, so an unknown kernel is judged exactly as
before this analysis existed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

# builtins whose first argument is only accumulated into (when the call's value is unused)
_ACCUMULATE = {"atomic_add", "atomic_sub", "tile_atomic_add"}
# builtins that store into their first argument without reading it
_STORE = {"tile_store", "array_store"}
# builtins that read their first argument's values
_LOAD = {"tile_load", "tile_load_indexed", "load"}
# attributes of an array that are metadata, not values
_METADATA = {"shape", "ndim", "strides", "size", "dtype"}
_MAX_DEPTH = 8


@dataclass(frozen=True)
class ArgumentAccess:
    """Names of the kernel's arguments whose values it may read, and those it may write (both conservative)."""

    reads: frozenset[str]
    writes: frozenset[str]
    known: bool = True  # False: the source could not be analysed; every argument counts as read and written
    # written by a plain store somewhere (``a[i] = v``, ``a[i].x = v``); the other written ones only accumulate
    # (``a[i] += v``, ``wp.atomic_add``): what was there before flows on
    stores: frozenset[str] = frozenset()

    def reads_value(self, name: str) -> bool:
        return not self.known or name in self.reads

    def writes_to(self, name: str) -> bool:
        return not self.known or name in self.writes


_CACHE: dict[int, tuple[object, ArgumentAccess]] = {}


def argument_access(kernel) -> ArgumentAccess:
    """The access of every argument of ``kernel`` (cached per kernel object)."""
    cached = _CACHE.get(id(kernel))
    if cached is not None and cached[0] is kernel:
        return cached[1]
    try:
        access = _analyse(kernel)
    except Exception:  # noqa: BLE001 - an unusual source is judged conservatively, never an error
        access = ArgumentAccess(frozenset(), frozenset(), known=False)
    _CACHE[id(kernel)] = (kernel, access)  # the kernel is kept: its id stays its own
    return access


def function_source(func):
    """(the dedented source, its first line in the file, its AST) of a Python function, as ``inspect`` gives them, by
    Warp's own extractor where it has one (1.19: ``Adjoint.extract_function_source``, which slices the file by the
    code's line table instead of tokenizing it: ~0.1 ms against ``inspect.getsourcelines``'s ~2 ms for a kernel of a
    long file); None where it has none or cannot (the caller asks ``inspect``)."""
    try:
        from warp._src.codegen import Adjoint
    except ImportError:
        return None
    extract = getattr(Adjoint, "extract_function_source", None)
    if extract is None:
        return None
    try:
        source, first, tree = extract(func)
    except Exception:  # noqa: BLE001 - a function Warp cannot read: inspect says why, or gives up as before
        return None
    return (source, first, tree) if isinstance(tree, ast.Module) else None


def _analyse(kernel) -> ArgumentAccess:
    adj = kernel.adj
    names = [arg.label for arg in adj.args]
    function = _function_def(adj.tree)
    if function is None:
        return ArgumentAccess(frozenset(), frozenset(), known=False)
    scope = getattr(getattr(kernel, "func", None), "__globals__", {}) or {}
    visitor = _Visitor(set(names), scope, 0)
    reads, writes = visitor.run(function)
    return ArgumentAccess(frozenset(reads), frozenset(writes), stores=frozenset(visitor.stores))


def _function_def(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            return node
    return None


class _Visitor:
    """One function body: which of ``names`` (its array parameters) are read and written."""

    def __init__(self, names: set[str], scope: dict, depth: int):
        self.names, self.scope, self.depth = names, scope, depth
        self.reads: set[str] = set()
        self.writes: set[str] = set()
        self.stores: set[str] = set()

    def run(self, function: ast.FunctionDef) -> tuple[set[str], set[str]]:
        for statement in function.body:
            self.statement(statement)
        return self.reads, self.writes

    # -- statements -------------------------------------------------------------------------------------------
    def statement(self, node) -> None:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                self.target(target, augmented=False)
            self.expr(node.value)
        elif isinstance(node, ast.AugAssign):
            self.target(node.target, augmented=True)
            self.expr(node.value)
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self.target(node.target, augmented=False)
                self.expr(node.value)
        elif isinstance(node, ast.Expr):
            self.expr(node.value, used=False)
        else:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt):
                    self.statement(child)
                elif isinstance(child, ast.expr):
                    self.expr(child)

    def target(self, node, augmented: bool) -> None:
        if isinstance(node, (ast.Tuple, ast.List)):
            for element in node.elts:
                self.target(element, augmented)
            return
        if isinstance(node, ast.Subscript):
            root = self.root(node.value)
            self.index(node)
            if root is not None:
                self.writes.add(root)  # a[i] = v stores; a[i] += v is an atomic add in Warp: neither reads a
                if not augmented:
                    self.stores.add(root)
                if not isinstance(node.value, ast.Name) and not _plain_path(node.value):
                    self.reads.add(root)
            else:
                self.expr(node.value)
            return
        if isinstance(node, ast.Attribute):  # a[i].x = v (or s.f[i].x): load, modify, store
            root = self.root(node.value)
            if root is not None:
                self.reads.add(root)
                self.writes.add(root)
                self.stores.add(root)
            self.expr(node.value)
            return
        # a plain local name: nothing to record

    # -- expressions ------------------------------------------------------------------------------------------
    def expr(self, node, used: bool = True) -> None:
        if node is None:
            return
        if isinstance(node, ast.Call):
            self.call(node, used)
            return
        if isinstance(node, ast.Subscript):
            root = self.root(node.value)
            if root is not None:
                if not _metadata(node.value):  # a.shape[0]: metadata, not values
                    self.reads.add(root)
                self.index(node)
                return
        if isinstance(node, ast.Attribute):
            if node.attr in _METADATA and self.root(node.value) is not None:
                return  # a.shape[0]: metadata, not values
            root = self.root(node)
            if root is not None:  # a struct field or an array used whole: cannot tell
                self.unknown(root)
                return
        if isinstance(node, ast.Name):
            if node.id in self.names:
                self.unknown(node.id)  # the array itself, aliased or passed on
            return
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child)

    def index(self, node: ast.Subscript) -> None:
        self.expr(node.slice)

    def call(self, node: ast.Call, used: bool) -> None:
        name = _call_name(node.func)
        args = list(node.args)
        first = self.root(args[0]) if args else None
        if name == "len" and first is not None:
            return
        if name in _ACCUMULATE and first is not None:
            self.writes.add(first)
            if used:
                self.reads.add(first)
            self.rest(args[1:], node.keywords)
            return
        if name in _STORE and first is not None:
            self.writes.add(first)
            self.rest(args[1:], node.keywords)
            return
        if name in _LOAD and first is not None:
            self.reads.add(first)
            self.rest(args[1:], node.keywords)
            return
        callee = self.resolve(node.func)
        if callee is not None and self.depth < _MAX_DEPTH:
            self.user_function(callee, node)
            return
        if isinstance(node.func, ast.Attribute) and self.root(node.func.value) is not None:
            if node.func.attr not in _METADATA:  # dest.dtype(v) builds a value of the array's type: no read
                self.unknown(self.root(node.func.value))  # a method of an argument
        self.rest(args, node.keywords)

    def rest(self, args, keywords) -> None:
        for arg in args:
            self.expr(arg)
        for keyword in keywords:
            self.expr(keyword.value)

    def user_function(self, callee, node: ast.Call) -> None:
        """A call of the user's ``@wp.func``: what it does with each parameter happens to the argument passed."""
        adj = getattr(callee, "adj", None)
        function = _function_def(getattr(adj, "tree", None)) if adj is not None else None
        if function is None:
            self.rest(node.args, node.keywords)
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                root = self.root(arg)
                if root is not None:
                    self.unknown(root)
            return
        parameters = [a.arg for a in function.args.args]
        bound: dict[str, ast.expr] = dict(zip(parameters, node.args))
        bound.update({k.arg: k.value for k in node.keywords if k.arg})
        passed = {p: self.root(v) for p, v in bound.items() if _is_whole(v, self.root(v))}
        scope = getattr(getattr(callee, "func", None), "__globals__", self.scope) or self.scope
        inner = _Visitor(set(passed), scope, self.depth + 1)
        inner.run(function)
        for parameter, root in passed.items():
            if parameter in inner.reads:
                self.reads.add(root)
            if parameter in inner.writes:
                self.writes.add(root)
            if parameter in inner.stores:
                self.stores.add(root)
        for parameter, value in bound.items():
            if parameter not in passed:
                self.expr(value)

    def resolve(self, func):
        """The Warp user function a call names, or None (builtins, methods, anything not found)."""
        value = None
        if isinstance(func, ast.Name):
            value = self.scope.get(func.id)
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            owner = self.scope.get(func.value.id)
            value = getattr(owner, func.attr, None) if owner is not None else None
        is_user = (
            value is not None
            and getattr(value, "adj", None) is not None
            and not getattr(value, "is_builtin", lambda: False)()
        )
        return value if is_user and hasattr(value, "func") else None

    def root(self, node) -> str | None:
        """The argument an expression is a part of (``a``, ``a[i]``, ``s.field``, ``s.field[i]``), or None."""
        while isinstance(node, (ast.Subscript, ast.Attribute)):
            node = node.value
        if isinstance(node, ast.Name) and node.id in self.names:
            return node.id
        return None

    def unknown(self, name: str) -> None:
        self.reads.add(name)
        self.writes.add(name)
        self.stores.add(name)


def _metadata(node) -> bool:
    """``a.shape`` (``s.field.strides``): an array's metadata attribute."""
    return isinstance(node, ast.Attribute) and node.attr in _METADATA


def _plain_path(node) -> bool:
    """``s.field`` (a struct's array field): storing into ``s.field[i]`` does not read it."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _is_whole(value, root: str | None) -> bool:
    """An argument passed on as a whole (``a`` or ``s.field``), not one of its elements."""
    return root is not None and _plain_path(value)


def _call_name(func) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None
