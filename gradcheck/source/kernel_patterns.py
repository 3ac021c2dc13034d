"""Source patterns in a kernel that Warp differentiates wrongly.

adjoint-mismatch names the launch whose adjoint is wrong; when the kernel also contains a construct Warp is
known to mishandle, the finding can say which line, and what to write instead (gradcheck.model.known_bugs).
Two kinds: constructs an old release got wrong (fixed since: the note names the release) and constructs every
release so far gets wrong (the rewrite is the only fix). Found from the kernel's own source and options, and
the source of the ``@wp.func`` functions it calls, never by running it. Only asked about launches whose adjoint
was measured wrong, so the patterns lean to naming a construct that may be fine over missing one that is not.
"""

from __future__ import annotations

import ast
import functools
import inspect
import sys
import textwrap
from dataclasses import dataclass


@dataclass(frozen=True)
class Suspect:
    bug: str  # the name of a KnownBug (or LiveBug) in gradcheck.model.known_bugs
    where: str | None  # file:line of the construct
    what: str
    rewrite: str = ""  # what to write instead, with the construct's own names where they are known


LOOP_REWRITE = (
    "loop over a constant bound of at most max_unroll ({max_unroll}) with a guard "
    "(`for i in range(MAX_LIGHTS): if i < n: ...`), or force the unroll with wp.static "
    "(`if wp.static(i) < n:` in the body), or accumulate into an array element (`wp.atomic_add(out, tid, val)`)"
)


def suspects(kernel) -> tuple[Suspect, ...]:
    """Constructs in ``kernel`` that Warp mishandles, whichever Warp is in use (the finding checks the version)."""
    found = []
    options = getattr(kernel, "options", None) or {}
    module_options = getattr(getattr(kernel, "module", None), "options", None) or {}
    if options.get("enable_backward") is True and module_options.get("enable_backward") is False:
        found.append(
            Suspect(
                "FUNC_ADJOINTS_FOLLOW_MODULE",
                _where(kernel, None),
                "the kernel opts in to enable_backward=True in a module built with it off",
            )
        )
    func = getattr(kernel, "func", None)
    if func is not None:
        try:
            found.extend(_from_source(func, _max_unroll(kernel)))
        except Exception:  # a diagnosis must never fail on a source it cannot read
            pass
    return tuple(found)


@dataclass(frozen=True)
class _Source:
    """One Python function's parsed source, and the names its body can see (what Warp resolves them in)."""

    func: object
    node: ast.FunctionDef
    first: int  # the file line of the source's first line (its decorator)
    path: str | None
    names: dict  # its globals and closure
    assigned: dict  # local name → the values assigned to it (None for augmented assignments and loop targets)

    def where(self, node: ast.AST) -> str | None:
        return f"{self.path}:{self.first + node.lineno - 1}" if self.path else None

    @property
    def params(self) -> set[str]:
        a = self.node.args
        return {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]}


def parse_source(func) -> _Source | None:
    from gradcheck.warp_compat.kernel_access import function_source

    try:
        found = function_source(func)  # Warp's own extractor, where it has one: the same source, faster
        if found is None:
            lines, first = inspect.getsourcelines(func)
            tree = ast.parse(textwrap.dedent("".join(lines)))
        else:
            _source, first, tree = found
        path = inspect.getsourcefile(func)
    except (OSError, TypeError, SyntaxError):
        return None
    node = next((n for n in tree.body if isinstance(n, ast.FunctionDef)), None)
    if node is None:
        return None
    names = dict(getattr(func, "__globals__", None) or {})
    code = getattr(func, "__code__", None)
    for name, cell in zip(getattr(code, "co_freevars", ()), getattr(func, "__closure__", None) or ()):
        try:
            names[name] = cell.cell_contents
        except ValueError:  # a closure variable not bound yet
            pass
    assigned: dict[str, list] = {}
    for n in ast.walk(node):
        if isinstance(n, ast.Assign):
            for target in n.targets:
                for name in _stored(target):
                    assigned.setdefault(name, []).append(n.value if isinstance(target, ast.Name) else None)
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign, ast.For)):
            plain = isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
            for name in _stored(n.target):
                assigned.setdefault(name, []).append(n.value if plain else None)
    return _Source(func, node, first, path, names, assigned)


def _stored(target: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]


@functools.lru_cache(maxsize=512)
def _from_source(func, max_unroll: int) -> tuple[Suspect, ...]:
    """Everything found in the source of ``func`` and the ``@wp.func`` functions it calls. Cached: blame asks
    once per failing launch, and a training loop launches the same kernel thousands of times."""
    top = parse_source(func)
    if top is None:
        return ()
    found = []
    seen = {getattr(func, "__code__", func)}
    queue: list[tuple[_Source, str]] = [(top, "")]
    while queue:
        src, prefix = queue.pop(0)
        if not prefix:  # the ternary bug was about kernels' own source (docs/warp-versions.md)
            found.extend(_same_element_ternaries(src))
        found.extend(_with_prefix(_runtime_loop_carried(src, max_unroll), prefix))
        found.extend(_with_prefix(_in_place_overwrites(src), prefix))
        for name, callee in called_functions(src):
            key = getattr(callee, "__code__", callee)
            if key in seen:
                continue
            seen.add(key)
            parsed = parse_source(callee)
            if parsed is not None:
                queue.append((parsed, f"in @wp.func {name} (called from {src.node.name}): "))
    return tuple(found)


def _with_prefix(found: list[Suspect], prefix: str) -> list[Suspect]:
    return [Suspect(s.bug, s.where, prefix + s.what, s.rewrite) for s in found]


def _same_element_ternaries(src: _Source) -> list[Suspect]:
    """``a[i] if c else f(a[i])``: both branches read the same subscript."""
    found = []
    for node in ast.walk(src.node):
        if not isinstance(node, ast.IfExp):
            continue
        left = {ast.dump(n) for n in ast.walk(node.body) if isinstance(n, ast.Subscript)}
        common = [n for n in ast.walk(node.orelse) if isinstance(n, ast.Subscript) and ast.dump(n) in left]
        if common:
            text = ast.unparse(common[0])
            found.append(
                Suspect(
                    "TERNARY_SAME_ELEMENT",
                    src.where(node),
                    f"both branches of a conditional expression read {text}",
                    "read the element into a local variable before the conditional expression",
                )
            )
    return found


# --- values carried through a dynamic loop (RUNTIME_LOOP_CARRIED) -------------------------------------------


def _runtime_loop_carried(src: _Source, max_unroll: int) -> list[Suspect]:
    """A variable defined before a loop Warp emits as a dynamic loop, assigned in it and read after it.

    Warp unrolls ``for i in range(C)`` when every bound is a compile-time constant and there are at most
    max_unroll iterations (or the body has a ``wp.static`` of a loop index); everything else is a dynamic loop,
    whose adjoint re-runs the body on the value the variable has after the loop: measured on 1.19, an
    accumulate-then-square gets a zero gradient and a running product a wrong one. A variable only read in
    the loop, or defined in it, or an array the loop writes, is carried by no local and is not named.
    """
    found: list[tuple[ast.AST, list[str], str]] = []
    for loop in ast.walk(src.node):
        why = dynamic_loop_reason(loop, src, max_unroll)
        if why is None:
            continue
        carried = [name for name in _carried(loop, src) if not _reported_outside(found, loop, name)]
        if carried:
            found.append((loop, carried, why))
    out = []
    for loop, carried, why in found:
        names = ", ".join(f"`{n}`" for n in carried)
        header = _header(loop)
        out.append(
            Suspect(
                "RUNTIME_LOOP_CARRIED",
                src.where(loop),
                f"{names} {'is' if len(carried) == 1 else 'are'} updated in `{header}` ({why}) and read after it",
                LOOP_REWRITE.format(max_unroll=max_unroll),
            )
        )
    return out


def dynamic_loop_reason(loop: ast.AST, src: _Source, max_unroll: int) -> str | None:
    """Why Warp emits ``loop`` as a dynamic loop; None for a loop it unrolls (or no loop)."""
    if isinstance(loop, ast.While):
        return "a while loop"
    if not isinstance(loop, ast.For):
        return None
    it = loop.iter
    is_range = isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
    if not is_range or not 0 < len(it.args) <= 3:
        return "a loop over an iterator"
    if not all(_is_constant(arg, src) for arg in it.args):
        return "trip count known only at run time"
    if _static_of_loop_index(loop, src):
        return None  # wp.static of a loop index forces the unroll, whatever the count
    values = [_int_value(arg, src) for arg in it.args]
    if None not in values and len(range(*values)) > max_unroll:
        return f"{len(range(*values))} iterations, above max_unroll {max_unroll}: not unrolled"
    if _breaks(loop.body):
        return "a break: not unrolled"
    return None


def _is_constant(node: ast.AST, src: _Source) -> bool:
    """A range() bound Warp knows at compile time: an int literal, wp.static(...), a module-level (or captured)
    int or wp.constant, or a local assigned only int literals. Not: a kernel argument, a struct field,
    ``arr.shape[0]``, or arithmetic (Warp does not fold ``range(2 * N)``)."""
    if isinstance(node, ast.Call):
        return _is_static_call(node, src)
    if isinstance(node, ast.Name) and node.id in src.params:
        return False
    if isinstance(node, ast.Name) and node.id in src.assigned:
        return all(isinstance(v, ast.Constant) and _is_int(v.value) for v in src.assigned[node.id])
    return _int_value(node, src) is not None


def _int_value(node: ast.AST, src: _Source) -> int | None:
    if isinstance(node, ast.Constant):
        return node.value if _is_int(node.value) else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _int_value(node.operand, src)
        return -value if value is not None else None
    if isinstance(node, ast.Name) and node.id in src.assigned:
        values = {v.value for v in src.assigned[node.id] if isinstance(v, ast.Constant)}
        return values.pop() if len(values) == 1 else None
    if isinstance(node, ast.Call) and _is_static_call(node, src) and len(node.args) == 1:
        return _int_value(node.args[0], src)  # wp.static(N): N; of anything else the value is unknown here
    value = resolve_name(node, src)
    return value if _is_int(value) else None


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def resolve_name(node: ast.AST, src: _Source):
    """A Name or dotted Attribute in the function's globals and closure; None when it is not one."""
    if isinstance(node, ast.Name):
        if node.id in src.params or node.id in src.assigned:
            return None
        return src.names.get(node.id)
    if isinstance(node, ast.Attribute):
        base = resolve_name(node.value, src)
        return getattr(base, node.attr, None) if base is not None else None
    return None


def _is_static_call(node: ast.Call, src: _Source) -> bool:
    target = resolve_name(node.func, src)
    if target is not None:
        warp = sys.modules.get("warp")
        return target is getattr(warp, "static", object())
    return ast.unparse(node.func) in ("wp.static", "warp.static")


def _static_of_loop_index(loop: ast.For, src: _Source) -> bool:
    """A ``wp.static(...)`` in the loop that reads a loop index: Warp cannot evaluate it when the kernel is
    declared (where it replaces every other wp.static by its value), defers it to codegen, and unrolls the loop
    around it whatever its length. Measured on 1.19: ``if wp.static(j) < n:`` in a 32-long loop is right."""
    indices = {name for f in ast.walk(src.node) if isinstance(f, ast.For) for name in _stored(f.target)}
    for node in ast.walk(loop):
        if isinstance(node, ast.Call) and _is_static_call(node, src):
            if any(isinstance(n, ast.Name) and n.id in indices for a in node.args for n in ast.walk(a)):
                return True
    return False


def _breaks(body: list[ast.stmt]) -> bool:
    """A break of this loop (as Warp looks for one: in the body and its if-blocks, not in nested loops)."""
    for statement in body:
        if isinstance(statement, ast.Break):
            return True
        if isinstance(statement, ast.If) and (_breaks(statement.body) or _breaks(statement.orelse)):
            return True
    return False


def _carried(loop: ast.AST, src: _Source) -> list[str]:
    """Variables defined before ``loop``, assigned in it (a name, or a component of a local: ``v[0] = ...``)
    and read after it."""
    indices = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)} if isinstance(loop, ast.For) else set()
    end = loop.end_lineno or loop.lineno
    assigned = []
    for node in ast.walk(loop):
        if node is loop:
            continue
        if isinstance(node, ast.For):  # a nested loop's index is the loop's own business
            indices |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            assigned.append(node.id)
        elif isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(node.ctx, ast.Store):
            base = _base_name(node)
            if base is not None and base not in src.params:  # a component of a local, not an array argument
                assigned.append(base)
    before = set(src.params)
    after = set()
    for node in ast.walk(src.node):
        if isinstance(node, ast.Name) and hasattr(node, "lineno"):
            if isinstance(node.ctx, ast.Store) and node.lineno < loop.lineno:
                before.add(node.id)
            elif isinstance(node.ctx, ast.Load) and node.lineno > end:
                after.add(node.id)
    return list(dict.fromkeys(n for n in assigned if n in before and n in after and n not in indices))


def _reported_outside(found, loop: ast.AST, name: str) -> bool:
    """``name`` already named at a dynamic loop around ``loop`` (nested dynamic loops: named once, outermost)."""
    return any(
        name in names and outer.lineno < loop.lineno <= (outer.end_lineno or outer.lineno) for outer, names, _ in found
    )


def _base_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _header(loop: ast.AST) -> str:
    if isinstance(loop, ast.For):
        return f"for {ast.unparse(loop.target)} in {ast.unparse(loop.iter)}"
    return f"while {ast.unparse(loop.test)}"


# --- non-additive in-place updates (IN_PLACE_OVERWRITE) -----------------------------------------------------


def _in_place_overwrites(src: _Source) -> list[Suspect]:
    """``x[i] = f(x[i], ...)`` where f is not ``x[i] + g(...)`` with g free of x.

    Warp's backward re-runs the kernel on the arrays as they are after the forward: x[i] then holds the new
    value, so every derivative that reads x[i] (that of ``a`` in ``x[i] = x[i] * a[i]``) is taken at the wrong
    point. An additive update (``x[i] = x[i] + g``, ``x[i] -= g``, ``wp.atomic_add``) has derivative 1 in
    x[i] and g never reads x, so it comes out right. ``xi = x[i]; x[i] = xi * a[i]`` is the same construct.
    Measured on 1.19: ``x[i] = x[i] * a[i]`` gives a.grad = 2 x_new² where the loss sum x_new² needs 2 x_new x_old.
    """
    aliases: dict[str, tuple[str, str]] = {}  # local → (array, index) it was read from
    found = []
    statements = sorted(
        (n for n in ast.walk(src.node) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))),
        key=lambda n: (n.lineno, n.col_offset),
    )
    for node in statements:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        target = targets[0]
        # an element of an array argument (or of a struct argument's array); a local vector's component is SSA
        if len(targets) == 1 and isinstance(target, ast.Subscript) and _base_name(target) in src.params and value:
            element = (ast.dump(target.value), ast.dump(target.slice))
            if isinstance(node, ast.AugAssign):
                additive = isinstance(node.op, (ast.Add, ast.Sub)) and not _reads_array(value, element[0], aliases)
                wrong = not additive
            else:
                wrong = _reads_element(value, element, aliases) and not _additive(value, element, aliases)
            if wrong:
                array, index = ast.unparse(target.value), ast.unparse(target.slice)
                shown = ast.BinOp(target, node.op, value) if isinstance(node, ast.AugAssign) else value  # x[i] *= a
                found.append(
                    Suspect(
                        "IN_PLACE_OVERWRITE",
                        src.where(node),
                        f"`{clip(ast.unparse(node))}` overwrites the element of {array} it reads, not additively",
                        f"write the result to a separate output array ({array}_out[{index}] = "
                        f"{clip(ast.unparse(shown))}) and read that downstream",
                    )
                )
        for target in targets:  # keep the aliases current
            for n in ast.walk(target):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                    aliases.pop(n.id, None)
            if isinstance(node, ast.Assign) and isinstance(target, ast.Name) and isinstance(value, ast.Subscript):
                aliases[target.id] = (ast.dump(value.value), ast.dump(value.slice))
    return found


def _reads_element(node: ast.AST, element: tuple[str, str], aliases) -> bool:
    return any(_is_element(n, element, aliases) for n in ast.walk(node))


def _is_element(node: ast.AST, element: tuple[str, str], aliases) -> bool:
    if isinstance(node, ast.Subscript):
        return (ast.dump(node.value), ast.dump(node.slice)) == element
    return isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and aliases.get(node.id) == element


def _reads_array(node: ast.AST, array: str, aliases) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.Subscript) and ast.dump(n.value) == array:
            return True
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and aliases.get(n.id, ("",))[0] == array:
            return True
    return False


def _additive(value: ast.AST, element: tuple[str, str], aliases) -> bool:
    """``value`` is ``x[i] ± g ± h ...`` (x[i] once, with a plus sign) and no other term reads x."""
    terms: list[tuple[ast.AST, int]] = []

    def split(node: ast.AST, sign: int) -> None:
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            split(node.left, sign)
            split(node.right, sign if isinstance(node.op, ast.Add) else -sign)
        else:
            terms.append((node, sign))

    split(value, 1)
    own = [(t, s) for t, s in terms if _is_element(t, element, aliases)]
    others = [t for t, _ in terms if not _is_element(t, element, aliases)]
    return len(own) == 1 and own[0][1] == 1 and not any(_reads_array(t, element[0], aliases) for t in others)


def clip(text: str, width: int = 80) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


# --- helpers ---------------------------------------------------------------------------------------------------


def called_functions(src: _Source) -> list[tuple[str, object]]:
    """The user ``@wp.func`` functions the body calls: (name as written, the Python function)."""
    out = []
    for node in ast.walk(src.node):
        if not isinstance(node, ast.Call):
            continue
        target = resolve_name(node.func, src)
        func = getattr(target, "func", None)
        if func is None or not hasattr(func, "__code__"):
            continue
        try:
            if target.is_builtin():
                continue
        except Exception:
            pass
        out.append((ast.unparse(node.func), func))
    return out


def _max_unroll(kernel) -> int:
    """The loop length Warp unrolls up to: the kernel's option, its module's, then warp.config's (16)."""
    for options in (getattr(kernel, "options", None), getattr(getattr(kernel, "module", None), "options", None)):
        value = options.get("max_unroll") if isinstance(options, dict) else None
        if _is_int(value):
            return value
    value = getattr(getattr(sys.modules.get("warp"), "config", None), "max_unroll", None)
    return value if _is_int(value) else 16


def _where(kernel, line: int | None) -> str | None:
    func = getattr(kernel, "func", None)
    try:
        path = inspect.getsourcefile(func)
        if line is None:
            line = inspect.getsourcelines(func)[1]
    except (OSError, TypeError):
        return None
    return f"{path}:{line}"
