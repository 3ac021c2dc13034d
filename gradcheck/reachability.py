"""Every gradient buffer a tape can touch: what the zero audit must find all-zero.

``tape.zero()`` clears ``tape.gradients``, which is filled during backward from kernel
arguments. Buffers reached another way are easy to miss: struct fields (nested), records of an
array of structs (Warp copies descriptors into device memory and keeps no reference), arrays
passed to ``record_func``, and the parameters themselves. This module enumerates them all, each
with the path the user would use to reach it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from gradcheck.naming import ArrayNames
from gradcheck.warp_compat import (
    is_array,
    is_array_var,
    is_struct_instance,
    is_struct_type,
    kernel_launches,
    struct_fields,
    struct_records,
    tape_gradient_keys,
)


@dataclass(frozen=True)
class GradBuffer:
    grad: object  # a wp.array holding gradient values
    fallback: str  # name to use when the scenario walk does not reach it ("kernel.argument.grad")
    reached_via: str
    aliases: tuple[str, ...] = ()  # other paths to the same memory

    def subject(self, names: ArrayNames) -> str:
        if self.reached_via == "array of structs":
            return self.fallback  # the path the tape used; the owner's own name is an alias
        return names.name(self.grad) or self.fallback


def reachable_gradients(tape, params: dict, names: Callable[[], ArrayNames]) -> list[GradBuffer]:
    """Unique gradient buffers (by address) reachable from the tape and the params.

    ``names`` is called only when a buffer can be reached by address alone (records of an array
    of structs): naming walks the whole scenario, which is not free on every pass.
    """
    found: dict[tuple[int, int], GradBuffer] = {}
    aliases: dict[tuple[int, int], list[str]] = {}
    decoded: set[int] = set()  # arrays of structs already read (one host copy each)

    def add(grad, fallback: str, via: str) -> None:
        key = (grad.ptr, grad.size)
        if key not in found:
            found[key] = GradBuffer(grad, fallback, via)

    def visit(value, fallback: str, via: str, depth: int = 0) -> None:
        if is_array(value):
            grad = value.grad
            if grad is not None and grad.ptr:
                add(grad, f"{fallback}.grad", via)
            if is_struct_type(value.dtype) and value.ptr and id(value) not in decoded:
                decoded.add(id(value))
                visit_records(value, names().name(value) or fallback)
        elif is_struct_instance(value) and depth < 16:
            for name, field_value, _var in struct_fields(value):
                visit(field_value, f"{fallback}.{name}", "struct field", depth + 1)

    def visit_records(array, path: str) -> None:
        for index, record in struct_records(array):
            visit_record(record, f"{path}[{index}]")

    def visit_record(record: dict, path: str) -> None:
        for name, (var, value) in record.items():
            if isinstance(value, dict):
                visit_record(value, f"{path}.{name}")
            elif is_array_var(var) and value.grad:
                known = names().at(value.grad)
                if known is None:
                    continue  # unknown owner: liveness cannot be proven, so it is not read here
                alias, grad = known
                add(grad, f"{path}.{name}.grad", "array of structs")
                aliases.setdefault((grad.ptr, grad.size), []).append(alias)

    for launch in kernel_launches(tape):
        for value, label in zip(launch.inputs + launch.outputs, launch.labels):
            visit(value, f"{launch.key}.{label}", "kernel argument")
    for key in tape_gradient_keys(tape):
        visit(key, "tape.gradients", "tape.gradients")
    for name, array in params.items():
        visit(array, name, "param")

    return [replace(b, aliases=tuple(dict.fromkeys(aliases.get(key, ())))) for key, b in found.items()]
