"""Names for arrays, found by walking the scenario object (or a program's roots) the way the user's code reaches them.

A finding that says ``states[100].joint_qdd.grad`` is actionable; one that says "array 0x7f3a…"
is not. The walk is breadth-first from the roots' attributes through lists,
tuples, dicts, Warp structs and plain Python objects (Newton's Model/State/Control/solver), so
each array gets its shortest path. Arrays the walk cannot reach get the ``kernel.argument`` label of the first
launch that used them from the observer's names (gradcheck.observe.names), not here.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

MAX_DEPTH = 8
MAX_NODES = 200_000

_ATOMS = (str, bytes, int, float, complex, bool, type(None))


@dataclass
class ArrayNames:
    """id(array) → path, and pointer → path for memory reached only by address."""

    by_id: dict[int, str] = field(default_factory=dict)
    by_ptr: dict[int, tuple[str, object]] = field(default_factory=dict)  # ptr → (path, array)
    arrays: list = field(default_factory=list)  # keeps every named array alive, so ids stay valid
    structs: dict[int, tuple[str, object]] = field(default_factory=dict)  # id → (path, struct instance)
    _spans: list | None = None  # sorted (start, end, path, array) for interior pointers

    def add(self, array, path: str) -> None:
        key = id(array)
        if key in self.by_id:
            return
        self.by_id[key] = path
        self.arrays.append(array)
        ptr = getattr(array, "ptr", None)
        if ptr:
            self.by_ptr.setdefault(ptr, (path, array))

    def name(self, array, default: str | None = None) -> str | None:
        return self.by_id.get(id(array), default)

    def at(self, ptr: int):
        """(path, array) of the named array whose memory starts at ``ptr``, or None."""
        return self.by_ptr.get(ptr)

    def covering(self, ptr: int):
        """(path, array) of a named array whose memory contains ``ptr`` (views included), or None."""
        import bisect

        exact = self.by_ptr.get(ptr)
        if exact is not None:
            return exact
        if self._spans is None:
            spans = []
            for path, array in self.by_ptr.values():
                size = max(int(getattr(array, "capacity", 0) or 0), 1)
                spans.append((array.ptr, array.ptr + size, path, array))
            spans.sort(key=lambda s: s[0])
            self._spans = spans
        i = bisect.bisect_right(self._spans, ptr, key=lambda s: s[0]) - 1
        for j in range(i, max(i - 64, -1), -1):  # views nest inside their parent: look back a little
            start, end, path, array = self._spans[j]
            if start <= ptr < end:
                return path, array
        return None

    def add_struct(self, instance, path: str) -> None:
        self.structs.setdefault(id(instance), (path, instance))


def walk(root, *more) -> ArrayNames:
    """Name every array reachable from ``root``'s attributes (``root`` itself is unnamed); then from each of
    ``more`` in turn, for the arrays not named yet: a name from an earlier root wins over a shorter one from a
    later root (the program's long-lived state before the locals of the function running now)."""
    from gradcheck.warp_compat import is_array
    from gradcheck.warp_compat import is_struct_instance as is_struct

    names = ArrayNames()
    seen = {id(root), *(id(r) for r in more)}
    nodes = 0
    for start in (root, *more):
        nodes = _breadth_first(start, names, seen, nodes, is_array, is_struct)
    return names


def _breadth_first(root, names: ArrayNames, seen: set, nodes: int, is_array, is_struct) -> int:
    queue = deque((child, path, 1) for path, child in _children(root, "", is_struct))
    while queue and nodes < MAX_NODES:
        obj, path, depth = queue.popleft()
        nodes += 1
        if is_array(obj):
            names.add(obj, path)
            grad = getattr(obj, "grad", None)
            if grad is not None:
                names.add(grad, path + ".grad")
            continue
        if isinstance(obj, _ATOMS) or id(obj) in seen or depth > MAX_DEPTH:
            continue
        seen.add(id(obj))
        try:  # any object a program holds: one whose attributes misbehave is passed over, never the walk
            if is_struct(obj):
                names.add_struct(obj, path)
            children = list(_children(obj, path, is_struct))
        except Exception:  # noqa: BLE001
            continue
        queue.extend((child, child_path, depth + 1) for child_path, child in children)
    return nodes


def _children(obj, path, is_struct):
    """(path, child) pairs; public attributes before private ones."""
    # a container's numbers and strings are never arrays and lead nowhere: passed over before a path is spelled for
    # them (a training script's loss history of 10^5 floats cost a walk ~0.1 s, and spent its node budget)
    if isinstance(obj, dict):
        for key, value in obj.items():
            if not isinstance(value, _ATOMS):
                yield f"{path}[{key!r}]", value
        return
    if isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            if not isinstance(value, _ATOMS):
                yield f"{path}[{i}]", value
        return
    if is_struct(obj):
        from gradcheck.warp_compat import struct_fields

        for name, value, _var in struct_fields(obj):
            yield _join(path, name), value
        return
    attrs = getattr(obj, "__dict__", None)
    if not isinstance(attrs, dict) or not _walkable(obj):
        return
    items = sorted(attrs.items(), key=lambda kv: kv[0].startswith("_"))
    for name, value in items:
        yield _join(path, name), value


def _walkable(obj) -> bool:
    """Plain objects only: not modules, functions, classes, tapes, Warp's runtime objects, numpy arrays, or
    gradcheck's own objects (a scenario that keeps the tape it is given must not get subjects named after one of
    gradcheck's own tapes). Objects from other ``warp.*`` packages are the user's program
    (``warp.examples``, ``warp.sim``, ``warp.optim``) and are walked."""
    kind = type(obj)
    if isinstance(obj, type) or callable(obj) and not hasattr(obj, "__dict__"):
        return False
    module = getattr(kind, "__module__", "") or ""
    if module.startswith(("numpy", "builtins", "types", "ctypes")):
        return False
    if module.startswith("gradcheck.") and not module.startswith("gradcheck.scenarios"):
        return False
    from gradcheck.warp_compat import is_tape, is_warp_runtime

    return kind.__name__ not in ("module", "function", "method") and not is_warp_runtime(module) and not is_tape(obj)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
