"""Which arrays are the program's parameters, and on what evidence.

A check judges a parameter's gradient more strictly than any other array's (a zero gradient on a parameter is an
error; on a model constant it is expected). gradcheck never decides that from the command that ran the program,
only from what the program showed:

- **declared**: the program said so (a scenario's ``params()``, ``gradcheck.audit(params=...)``);
- **updated**: the program used the gradient to update the array: a launch that takes ``x.grad`` and writes ``x``
  (an SGD or Adam step, ``warp.optim``), whatever tape, if any, the array is read under;
- **leaf**: an array that requires grad, is read by a recorded launch and written by none, but that nothing seen
  updates: perhaps a constant (Newton's model arrays all require grad), perhaps a param updated on the host.
"""

from __future__ import annotations

from gradcheck.model.trace import DECLARED, LEAF, UPDATED

MAX_LEAVES = 256  # distinct leaf arrays followed over a run: a program that makes new ones every step stays bounded


class ParamBook:
    """Params (declared or updated) are kept for the whole run; leaves only while the tape that reads them is the
    latest: a program that allocates new leaf arrays every step (a batch that requires grad) is neither kept
    alive by gradcheck nor measured forever. Keys stay distinct and stable (``key#2`` for a name taken)."""

    def __init__(self) -> None:
        self._params: dict[int, tuple[object, str, str]] = {}  # id → (array, key, DECLARED | UPDATED)
        self._current: dict[int, tuple[object, str]] = {}  # id → (array, key): the latest tape's leaves
        self._leaf_keys: dict[tuple[int, int], str] = {}  # (id, ptr) → key of every leaf seen (bounded)
        self._taken: set[str] = set()
        self._leaves: list = []  # the latest tape's leaves, for the argument set they were found in
        self._leaves_for = None
        # arrays another side judges (a wp.from_torch wrapper: its tensor is the torch side's param), never leaves here
        self.foreign = None
        self.update_sites: dict[int, str | None] = {}  # id → file:line of the launch first seen updating it

    def declare(self, params: dict) -> None:
        """The driver's declared params (``{key: array}``), on every pass (``params()`` may hand out new arrays)."""
        for key, array in params.items():
            for old in [i for i, (_a, k, _r) in self._params.items() if k == key and i != id(array)]:
                del self._params[old]
            self._current.pop(id(array), None)
            self._params[id(array)] = (array, key, DECLARED)  # the program's own key wins over any name a walk gave
            self._taken.add(key)

    def note_tape(self, tape, arguments, loss, grads, name_of) -> None:
        """The leaves of a tape about to run backward (found again only when its arguments changed: ``arguments``
        is the identity of the tape's classified argument set), the loss and grads= seeds aside."""
        if arguments is not self._leaves_for or not self._leaves:
            self._leaves, self._leaves_for = tape_leaves(tape), arguments
        skip = {id(loss)} | {id(a) for a in (grads or {})}
        self.note_leaves([a for a in self._leaves if id(a) not in skip], name_of)

    def note_leaves(self, leaves, name_of) -> None:
        """The leaves of the tape about to run backward (the previous tape's are forgotten)."""
        current = {}
        for array in leaves:
            if id(array) in self._params or (self.foreign is not None and self.foreign(array)):
                continue
            key = self._leaf_key(array, name_of)
            if key is not None:
                current[id(array)] = (array, key)
        self._current = current

    def _leaf_key(self, array, name_of) -> str | None:
        identity = (id(array), getattr(array, "ptr", 0))
        key = self._leaf_keys.get(identity)
        if key is None:
            if len(self._leaf_keys) >= MAX_LEAVES:
                return None  # beyond the bound: not followed (the params always are)
            key = self._leaf_keys[identity] = self._unique(name_of(array))
        return key

    def note_update(self, array, name_of) -> bool:
        """``array`` was updated from its gradient; True when that is news (a leaf or an unseen array)."""
        if id(array) in self._params:
            return False
        from gradcheck.model.sites import caller_site

        leaf = self._current.pop(id(array), None)
        key = leaf[1] if leaf is not None else self._leaf_keys.get((id(array), getattr(array, "ptr", 0)))
        self._params[id(array)] = (array, key or self._unique(name_of(array)), UPDATED)
        self.update_sites[id(array)] = caller_site()  # the update that showed it is a param (the program's line)
        return True

    def _unique(self, key: str) -> str:
        unique, n = key, 1
        while unique in self._taken:  # two arrays the walk gave one name (or none): keys must stay distinct
            n += 1
            unique = f"{key}#{n}"
        self._taken.add(unique)
        return unique

    def by_pointer(self) -> dict:
        """data pointer → array, for the params and current leaves: how a view the program passes finds its owner."""
        arrays = [a for a, _k, _r in self._params.values()] + [a for a, _k in self._current.values()]
        return {a.ptr: a for a in arrays if getattr(a, "ptr", None)}

    def role(self, array) -> str | None:
        entry = self._params.get(id(array))
        return entry[2] if entry is not None else (LEAF if id(array) in self._current else None)

    def is_param(self, array) -> bool:
        return id(array) in self._params

    def measured(self) -> dict[str, object]:
        """key → array of everything whose gradient is read after backward: params first, then the current leaves."""
        found = {key: array for array, key, _role in self._params.values()}
        found.update({key: array for array, key in self._current.values()})
        return found

    def params(self) -> list:
        return [a for a, _k, _r in self._params.values()]

    def gradients(self) -> list:
        """The params' gradients (None for one without): the sentinel reads them after every light backward."""
        return [getattr(a, "grad", None) for a, _k, _r in self._params.values()]

    def roles(self) -> dict[str, str]:
        """key → role of everything ever measured (params first)."""
        found = {key: role for _a, key, role in self._params.values()}
        for key in self._leaf_keys.values():
            found.setdefault(key, LEAF)
        return found

    @property
    def declared(self) -> bool:
        return any(role == DECLARED for _a, _k, role in self._params.values())

    def __contains__(self, array) -> bool:
        return id(array) in self._params or id(array) in self._current


def tape_leaves(tape) -> list:
    """Arrays that require grad, that a recorded launch reads and none writes (nor a recorded copy): the leaves.

    Written means ``shown_write`` (gradcheck.tape.launch_access): declared an output, or stored into by code that
    could be read. A kernel whose code cannot be read is not taken to write its inputs: it would make every param it
    reads an intermediate, and the program's leaves would go unaudited."""
    from gradcheck.tape.launch_access import recorded_accesses
    from gradcheck.warp_compat import has_float_values, tape_launches

    read: dict[int, object] = {}
    written: set[int] = set()
    for access in recorded_accesses(tape_launches(tape)):
        for use in access.arguments:
            if use.role.shown_write:  # a recorded wp.copy writes its destination: an intermediate, not a leaf
                written.update(map(id, use.arrays))
            elif access.kind == "launch":
                for array in use.arrays:
                    read.setdefault(id(array), array)
    return [
        a
        for key, a in read.items()
        if key not in written
        and getattr(a, "requires_grad", False)
        and getattr(a, "grad", None) is not None
        and has_float_values(a)  # ints, or structs with other fields, that require grad: no float gradient to judge
    ]


def updates(call, arguments, known: dict) -> list:
    """(x, x.grad) for every array x a launch may write while it also takes x's gradient: an update of x from its
    gradient. Matched by memory, not by object: warp.optim is handed views (``trajectories.flatten()`` and
    ``trajectories.grad.flatten()``, new objects every step), so ``known`` (data pointer → array) maps a view to
    the array the program holds."""
    from gradcheck.tape.launch_access import call_access
    from gradcheck.warp_compat import gradient_reader

    grad_of = gradient_reader()
    # carried_arrays takes type(), not isinstance: an object whose __class__ property claims wp.array (Warp's
    # test_array_subclass) or a host-only fixedarray Warp is about to refuse is no array of the program's to follow
    arrays = [(use.role, use.array) for use in call_access(call).arguments if use.array is not None]
    if len(arrays) < 2:
        return []
    pointers = {v.ptr for _role, v in arrays}
    found = []
    for role, value in arrays:
        owner = known.get(value.ptr, value)
        grad = grad_of(owner)
        # ``writes``: the code may write it (a declared output the code never touches is not updated)
        if grad is not None and grad.ptr in pointers and grad.ptr != value.ptr and role.writes:
            found.append((owner, grad))
    return found
