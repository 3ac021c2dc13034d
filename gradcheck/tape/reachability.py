"""Every gradient buffer a tape can touch: what the zero audit must find all-zero.

``tape.zero()`` clears ``tape.gradients``, which is filled during backward from kernel
arguments. Buffers reached another way are easy to miss: struct fields (nested), records of an
array of structs (Warp copies descriptors into device memory and keeps no reference), arrays
passed to ``record_func``, and the parameters themselves. This module enumerates them all; names
are built only for the few buffers that end up in a finding.

Cost matters: a 100-step Newton rollout records ~1,600 launches with ~18,000 array arguments,
mostly the same ~2,400 arrays again, and this runs on every audited backward. Arguments are deduplicated and
classified by TapeArguments (reused while passes pass the same objects), and plain kernel-argument
gradients are kept as bare arrays, not objects: allocating thousands of tracked objects per pass
triggers Python's cyclic GC during the user's own forward pass (measured: it alone cost ~10% of a
cartpole pass).
"""

from __future__ import annotations

from collections.abc import Callable

from gradcheck.tape.naming import ArrayNames
from gradcheck.tape.tape_arguments import TapeArguments
from gradcheck.warp_compat import (
    array_class,
    first_use_label,
    has_float_values,
    is_array_var,
    is_struct_instance,
    is_struct_type,
    struct_fields,
    struct_records,
    tape_gradient_keys,
    tape_launches,
)


class GradBuffer:
    """One gradient buffer with where it was reached from."""

    __slots__ = ("grad", "label", "reached_via", "aliases", "owner")

    def __init__(self, grad, label: Callable[[], str], reached_via: str, owner=None):
        self.grad = grad  # a wp.array holding gradient values
        self.label = label  # fallback name when the scenario walk does not reach it ("kernel.argument.grad")
        self.reached_via = reached_via
        self.aliases: list[str] = []  # other paths to the same memory
        self.owner = owner  # the array whose gradient this is, when known

    def subject(self, names: ArrayNames) -> str:
        if self.reached_via == "array of structs":
            return self.label()  # the path the tape used; the owner's own name is an alias
        return names.name(self.grad) or self.label()


class Reachable:
    """The reachable buffers: ``grads`` for the nonzero scan, ``buffer(i)`` for the few reported."""

    def __init__(self, launches, plain: dict, plain_grads: list, others: list[GradBuffer]):
        self._launches = launches
        self._owners = list(plain.values())  # arrays whose .grad is a plain kernel-argument buffer
        self._others = others
        self.grads = plain_grads + [b.grad for b in others]

    def __len__(self) -> int:
        return len(self.grads)

    def buffer(self, i: int) -> GradBuffer:
        if i >= len(self._owners):
            return self._others[i - len(self._owners)]
        owner = self._owners[i]
        return GradBuffer(self.grads[i], LaunchLabel(self._launches, owner, ".grad"), "kernel argument", owner)

    def owner(self, i: int):
        """The array buffer ``i`` is the gradient of (None when it was reached by address only)."""
        return self._owners[i] if i < len(self._owners) else self._others[i - len(self._owners)].owner


def reachable_gradients(
    tape, params: dict, names: Callable[[], ArrayNames], arguments: TapeArguments | None = None
) -> Reachable:
    """Unique gradient buffers (by address) reachable from the tape and the params.

    ``names`` is called only when a buffer can be reached by address alone (records of an array
    of structs): naming walks the whole scenario or program, which is not free on every pass.
    """
    array_type = array_class()
    launches = tape_launches(tape)
    if arguments is None:
        arguments = TapeArguments.of(tape)
    # keys are ptr << 64 | size: one int, not a (ptr, size) tuple, which the GC would track
    plain, plain_grads = arguments.plain_gradients()  # key → plain kernel argument whose .grad lives there
    found: dict[int, GradBuffer] = {}

    def add(grad, label: Callable[[], str], via: str, owner=None) -> GradBuffer | None:
        if not has_float_values(grad):  # an int gradient, or one of structs with other fields: no statistics apply
            return None
        key = grad.ptr << 64 | grad.size
        if key in plain:
            return None
        buffer = found.get(key)
        if buffer is None:
            buffer = found[key] = GradBuffer(grad, label, via, owner)
        return buffer

    def visit(value, label: Callable[[], str], via: str, depth: int = 0) -> None:
        if isinstance(value, array_type):
            grad = value.grad
            if grad is not None and grad.ptr:
                add(grad, _suffix(label, ".grad"), via, value)
            if is_struct_type(value.dtype) and value.ptr:
                visit_records(value, lambda: names().name(value) or label())
        elif is_struct_instance(value) and depth < 16:
            for name, field_value, _var in struct_fields(value):
                # nested fields are told apart: before Warp 1.8.1 tape.zero() missed exactly those (warp#807)
                via = "struct field" if depth == 0 else "nested struct field"
                visit(field_value, _suffix(label, "." + name), via, depth + 1)

    def visit_records(array, path: Callable[[], str]) -> None:
        for index, record in struct_records(array):
            visit_record(record, _suffix(path, f"[{index}]"))

    def visit_record(record: dict, path: Callable[[], str]) -> None:
        for name, (var, value) in record.items():
            if isinstance(value, dict):
                visit_record(value, _suffix(path, "." + name))
            elif is_array_var(var) and value.grad:
                known = names().at(value.grad)
                if known is None:
                    continue  # unknown owner: liveness cannot be proven, so it is not read here
                alias, grad = known
                buffer = add(
                    grad,
                    _suffix(path, f".{name}.grad"),
                    "array of structs",
                    (names().at(value.data) or (None, None))[1],
                )
                if buffer is not None:
                    buffer.aliases.append(alias)

    for value in arguments.nested:
        visit(value, LaunchLabel(launches, value), "kernel argument")
    unique = arguments.unique
    for key in [k for k in tape_gradient_keys(tape) if id(k) not in unique]:
        visit(key, lambda key=key: f"tape.gradients[{_described(key)}]", "tape.gradients")
    for name, array in params.items():
        visit(array, lambda name=name: name, "param")

    for buffer in found.values():
        buffer.aliases = list(dict.fromkeys(buffer.aliases))
    return Reachable(launches, plain, plain_grads, list(found.values()))


def _described(array) -> str:
    """An array nobody names (kept only by the tape, from an earlier recording): its shape and type."""
    dtype = getattr(getattr(array, "dtype", None), "__name__", None) or "?"
    return f"array of shape {tuple(getattr(array, 'shape', ()))}, {dtype}, from an earlier recording"


def _suffix(label: Callable[[], str], text: str) -> Callable[[], str]:
    return lambda: label() + text


class LaunchLabel:
    """``kernel.argument`` label of the first launch that used ``value``, found only when needed."""

    __slots__ = ("launches", "value", "suffix")

    def __init__(self, launches, value, suffix: str = ""):
        self.launches, self.value, self.suffix = launches, value, suffix

    def __call__(self) -> str:
        return first_use_label(self.launches, self.value, self.suffix) or f"<unnamed array>{self.suffix}"
