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


class ParamBook:
    """Params by ``id`` (the arrays are kept, so ids stay theirs), each with a key, a role and the order seen."""

    def __init__(self) -> None:
        self._arrays: dict[int, object] = {}
        self._keys: dict[int, str] = {}
        self._roles: dict[int, str] = {}
        self._leaves: list = []  # the last tape's leaves, for the argument set they were found in
        self._leaves_for = None

    def declare(self, params: dict) -> None:
        """The driver's declared params (``{key: array}``), on every pass (``params()`` may hand out new arrays)."""
        for key, array in params.items():
            for old in [i for i, k in self._keys.items() if k == key and i != id(array)]:
                for table in (self._arrays, self._keys, self._roles):
                    table.pop(old, None)
            self._keys[id(array)] = key  # the program's own key wins over any name a walk gave
            self._put(array, key, DECLARED)

    def note_tape(self, tape, arguments, loss, grads, name_of) -> None:
        """The leaves of a tape about to run backward (found again only when its arguments changed: ``arguments``
        is the identity of the tape's classified argument set), the loss and grads= seeds aside."""
        if arguments is not self._leaves_for or not self._leaves:
            self._leaves, self._leaves_for = tape_leaves(tape), arguments
        skip = {id(loss)} | {id(a) for a in (grads or {})}
        self.note_leaves([a for a in self._leaves if id(a) not in skip], name_of)

    def note_leaves(self, leaves, name_of) -> None:
        for array in leaves:
            if id(array) not in self._roles:
                self._put(array, name_of(array), LEAF)

    def note_update(self, array, name_of) -> bool:
        """``array`` was updated from its gradient; True when that is news (a leaf or an unseen array)."""
        role = self._roles.get(id(array))
        if role in (DECLARED, UPDATED):
            return False
        self._put(array, self._keys.get(id(array)) or name_of(array), UPDATED)
        return True

    def _put(self, array, key: str, role: str) -> None:
        self._arrays[id(array)] = array
        if id(array) not in self._keys:
            taken = set(self._keys.values())
            unique, n = key, 1
            while unique in taken:  # two arrays the walk gave one name (or none): keys must stay distinct
                n += 1
                unique = f"{key}#{n}"
            self._keys[id(array)] = unique
        if self._roles.get(id(array)) != DECLARED:
            self._roles[id(array)] = role

    def by_pointer(self) -> dict:
        """data pointer → array, for every array in the book: how a view the program passes finds its owner."""
        return {a.ptr: a for a in self._arrays.values() if getattr(a, "ptr", None)}

    def role(self, array) -> str | None:
        return self._roles.get(id(array))

    def key(self, array) -> str | None:
        return self._keys.get(id(array))

    def is_param(self, array) -> bool:
        return self._roles.get(id(array)) in (DECLARED, UPDATED)

    def measured(self) -> dict[str, object]:
        """key → array of everything whose gradient is read after backward: params first, then leaves."""
        order = sorted(self._arrays, key=lambda i: self._roles[i] == LEAF)
        return {self._keys[i]: self._arrays[i] for i in order}

    def params(self) -> list:
        return [a for i, a in self._arrays.items() if self._roles[i] != LEAF]

    def roles(self) -> dict[str, str]:
        return {self._keys[i]: self._roles[i] for i in self._arrays}

    @property
    def declared(self) -> bool:
        return DECLARED in self._roles.values()

    def __contains__(self, array) -> bool:
        return id(array) in self._roles


def tape_leaves(tape) -> list:
    """Arrays that require grad, that a recorded launch reads and none writes: the leaves of the tape."""
    from gradcheck.probes.replay_probe import arrays_of
    from gradcheck.probes.warp_compat import (
        argument_access,
        array_class,
        kernel_argument_names,
        launch_io,
        tape_launches,
    )

    array_type = array_class()
    read: dict[int, object] = {}
    written: set[int] = set()
    for _index, kernel, inputs, outputs in launch_io(tape_launches(tape)):
        access = argument_access(kernel)
        labels = kernel_argument_names(kernel)
        for position, value in enumerate([*inputs, *outputs]):
            label = labels[position] if position < len(labels) else ""
            # outputs= are written; an input is written when the kernel's code provably stores into it
            writes = position >= len(inputs) or (access.known and access.writes_to(label))
            for array in arrays_of(value, array_type):
                if writes:
                    written.add(id(array))
                else:
                    read.setdefault(id(array), array)
    return [
        a
        for key, a in read.items()
        if key not in written and getattr(a, "requires_grad", False) and getattr(a, "grad", None) is not None
    ]


def updates(call, arguments, known: dict) -> list:
    """(x, x.grad) for every array x a launch may write while it also takes x's gradient: an update of x from its
    gradient. Matched by memory, not by object: warp.optim is handed views (``trajectories.flatten()`` and
    ``trajectories.grad.flatten()``, new objects every step), so ``known`` (data pointer → array) maps a view to
    the array the program holds."""
    from gradcheck.probes.warp_compat import argument_access, array_class, gradient_reader

    array_type, grad_of = array_class(), gradient_reader()
    arrays = [(label, v) for label, v in arguments if isinstance(v, array_type) and v.ptr]
    if len(arrays) < 2:
        return []
    pointers = {v.ptr for _label, v in arrays}
    access = argument_access(call.kernel)
    found = []
    for label, value in arrays:
        owner = known.get(value.ptr, value)
        grad = grad_of(owner)
        if grad is not None and grad.ptr in pointers and grad.ptr != value.ptr and access.writes_to(label):
            found.append((owner, grad))
    return found
