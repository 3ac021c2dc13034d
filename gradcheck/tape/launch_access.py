"""What one launch reads and writes, and which argument carries which array: the one place every walker asks.

Two sources say what a launch does with an argument. Its *declaration*: ``wp.launch(inputs=..., outputs=...)`` (a
convention: Warp's own examples update state in place through ``inputs=``). Its *code*: which arguments the
kernel's syntax tree loads and writes (gradcheck.warp_compat.kernel_access, conservative: a use it cannot classify
counts as both; a kernel whose source cannot be read counts every argument as both). An argument carries arrays:
itself when it is an array, a struct's array fields (nested ones included) when it is a struct.

A caller that is wrong in one direction says something false, so each write question has a named answer, and each
caller takes the one whose error is a miss for it, never a false claim:

- ``writes``: the kernel's code may write it (every argument where the code cannot be read). What the code does,
  conservatively: write-after-read fingerprints around such a write (observe.rewrites: a missed write is a missed
  hazard; the fingerprint rules out a false one), an update of a param from its gradient (observe.params.updates,
  observe.gradient_use; observe.row_reads: an update is a step, not a read), the seeds of an adjoint test
  (rerun.adjoint_dependence);
- ``may_write``: declared an output, or ``writes``. Never misses a write. The dependency walks
  (observe.dataflow's leftover contamination, tape.flow_graph's chain from a param to the loss and the launches
  off the tape observe.unrecorded adds to it: see ``carried_from``), changed-before-backward's "a later launch
  wrote it" (observe.input_watch: a missed write would report the tape's own write as a change made beside it),
  and the adjoints a launch's backward reads (diagnose.backward_origin: a missed one would say a launch made a bad
  adjoint that came into it);
- ``shown_write``: declared an output, or the code (where it could be read) writes it. Never invents a write where
  the code cannot be read: a tape's leaves (observe.params.tape_leaves: an unreadable kernel that counted every
  argument written would make every param it reads an intermediate) and the per-launch replay's record
  (rerun.launch_record: ``known`` False tells the replay to compare contents for the rest instead).

``reads`` (the code may load its values) is one answer: conservative the one way every caller needs (an unread
argument is one the launch's values and its adjoint cannot depend on; rerun.carried_state does not call an input the
code only stores or accumulates into "read before this forward writes it"). ``accumulates``: the code writes it
only by accumulation (``a[i] += v``, ``wp.atomic_add``), so what was there before flows on (rerun.launch_check).

Arrays are kept as objects: a caller keys them by identity (one wp.array the program holds) or by data pointer (a
view and the array it was taken from share memory: tape.flow_graph merges them by span) as it needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

# what ``LaunchAccess.arrays`` can select by: a flag or a variant of ArgumentRole
Which = Literal["reads", "writes", "stores", "output", "may_write", "shown_write", "accumulates"]


@dataclass(frozen=True)
class ArgumentRole:
    """What a kernel does with the argument at one position, as declared and as its code says (no values)."""

    name: str
    position: int
    output: bool  # passed in outputs=
    reads: bool  # the code may load its values (every argument where the code cannot be read)
    writes: bool  # the code may write it (every argument where the code cannot be read)
    stores: bool  # some write is a plain store (``a[i] = v``), not an accumulation
    known: bool  # the kernel's code was read

    @property
    def may_write(self) -> bool:
        """Declared an output, or the code may write it: never misses a write."""
        return self.output or self.writes

    @property
    def shown_write(self) -> bool:
        """Declared an output, or the code (where it could be read) writes it: never invents one."""
        return self.output or (self.known and self.writes)

    @property
    def accumulates(self) -> bool:
        """The code writes it only by accumulating: what an earlier launch left there flows on."""
        return self.known and self.writes and not self.stores


class ArgumentUse(NamedTuple):
    """One argument of one launch: its role, its value, and the arrays it carries (struct fields included)."""

    role: ArgumentRole
    value: object
    arrays: tuple

    @property
    def array(self):
        """The argument itself when it is an array with memory (not a struct, not a value), else None."""
        return self.value if self.arrays and self.arrays[0] is self.value else None


@dataclass(frozen=True)
class LaunchAccess:
    """One launch (or a recorded whole or partial ``wp.copy``: ``kind`` "copy", ``src`` read, ``dest`` stored)."""

    kind: str  # "launch" or "copy"
    kernel: object  # None for a copy
    index: int | None  # its position on the tape; None for a live call
    arguments: tuple[ArgumentUse, ...]
    known: bool  # the kernel's code was read (a copy: always)

    @property
    def what(self) -> str:
        return getattr(self.kernel, "key", str(self.kernel)) if self.kind == "launch" else "wp.copy"

    def role(self, name: str) -> ArgumentRole | None:
        return next((use.role for use in self.arguments if use.role.name == name), None)

    def arrays(self, which: Which) -> list:
        """The arrays of the arguments whose role has ``which`` (an ArgumentRole flag or variant, e.g. "reads",
        "may_write", "output"), in argument order (an array passed twice comes twice)."""
        return [array for use in self.arguments if getattr(use.role, which) for array in use.arrays]

    def inputs(self) -> list:
        """Every array the launch's ``inputs=`` carry (what it was given to read, as declared)."""
        return [array for use in self.arguments if not use.role.output for array in use.arrays]

    def outputs(self) -> list:
        return [array for use in self.arguments if use.role.output for array in use.arrays]

    def carried_from(self) -> tuple[list, list]:
        """The dependency one launch makes: (arrays it may read, arrays it may write): every array it may write may
        depend on every array it may read. Both walks of a recording's dataflow use this (observe.dataflow for
        leftovers backward carries into a param, tape.flow_graph for where a param's values go), and both must
        never miss a dependency that exists: a missed one hides a leftover that backward really adds into a param,
        or reports a chain from a param to the loss broken where it is whole. So reads are what the code may load
        (an argument only its shape is taken of passes nothing on, forward or back), and writes are ``may_write``
        (a declared output, and every argument of a kernel whose code cannot be read)."""
        return self.arrays("reads"), self.arrays("may_write")


# -- roles, per kernel ---------------------------------------------------------------------------------------------

_ROLES: dict[tuple[int, int, int], tuple[object, tuple[ArgumentRole, ...]]] = {}


def kernel_roles(kernel, count: int, inputs: int) -> tuple[ArgumentRole, ...]:
    """The role of each of ``count`` argument positions of ``kernel``, the first ``inputs`` passed in inputs=
    (cached per kernel object: the kernel is kept, so its id stays its own)."""
    key = (id(kernel), count, inputs)
    cached = _ROLES.get(key)
    if cached is not None and cached[0] is kernel:
        return cached[1]
    from gradcheck.warp_compat import argument_access, kernel_argument_names

    access = argument_access(kernel)
    labels = kernel_argument_names(kernel)
    roles = []
    for position in range(count):
        name = labels[position] if position < len(labels) else f"arg{position}"
        roles.append(
            ArgumentRole(
                name,
                position,
                output=position >= inputs,
                reads=access.reads_value(name),
                writes=access.writes_to(name),
                stores=not access.known or name in access.stores,
                known=access.known,
            )
        )
    _ROLES[key] = (kernel, tuple(roles))
    return _ROLES[key][1]


_SCALARS = frozenset((float, int, bool, type(None)))


def carried_arrays(value, array_type) -> tuple:
    """The arrays an argument carries: itself when it is an array with memory (its type, not what its
    ``__class__`` claims), the array fields of a struct (nested ones too), else none."""
    kind = type(value)
    if kind in _SCALARS:
        return ()  # most non-array arguments (a time step, a count): no import, no struct test
    if issubclass(kind, array_type):
        return (value,) if getattr(value, "ptr", None) else ()
    from gradcheck.warp_compat import arrays_of, is_struct_instance

    return tuple(arrays_of(value, array_type)) if is_struct_instance(value) else ()


def launch_access(kernel, inputs, outputs, index: int | None = None) -> LaunchAccess:
    """The access of a launch of ``kernel`` with these ``inputs=`` and ``outputs=``."""
    from gradcheck.warp_compat import array_class

    array_type = array_class()
    values = [*inputs, *outputs]
    roles = kernel_roles(kernel, len(values), len(inputs))
    arguments = tuple(ArgumentUse(r, v, carried_arrays(v, array_type)) for r, v in zip(roles, values))
    known = roles[0].known if roles else True
    return LaunchAccess("launch", kernel, index, arguments, known)


def call_access(call) -> LaunchAccess:
    """The access of a live ``wp.launch`` call (gradcheck.warp_compat.hooks.LaunchCall, or anything with ``kernel``,
    ``inputs`` and ``outputs``). Kept on the call while it lasts (its ``access`` slot: the parts that ask about one
    launch, three on an audited one, share it) and never beyond: a call holds the program's frame, and with it
    every array it holds."""
    access = getattr(call, "access", None)
    if access is None:
        access = launch_access(call.kernel, call.inputs, call.outputs)
        if hasattr(call, "access"):
            call.access = access
    return access


def copy_access(dest, src, index: int | None = None) -> LaunchAccess:
    """A ``wp.copy`` (whole or in part): it reads ``src`` and stores into ``dest``."""
    read = ArgumentRole("src", 0, output=False, reads=True, writes=False, stores=False, known=True)
    written = ArgumentRole("dest", 1, output=True, reads=False, writes=True, stores=True, known=True)
    carried = lambda a: (a,) if getattr(a, "ptr", None) else ()  # noqa: E731
    return LaunchAccess(
        "copy", None, index, (ArgumentUse(read, src, carried(src)), ArgumentUse(written, dest, carried(dest))), True
    )


def recorded_accesses(launches, skip=frozenset()):
    """The access of each entry of a tape's launch list that moves values, in recording order: its kernel launches
    and its recorded copies (whole or partial; ``wp.clone`` and ``array.assign`` record one too). Other
    ``record_func`` entries are the program's own backward code: what they touch is not known here. ``skip``: tape
    positions not wanted (not built)."""
    from gradcheck.warp_compat import launch_io, recorded_copy

    kernels = {index: (kernel, inputs, outputs) for index, kernel, inputs, outputs in launch_io(launches)}
    for index, entry in enumerate(launches):
        if index in skip:
            continue
        if index in kernels:
            yield launch_access(*kernels[index], index=index)
            continue
        pair = recorded_copy(entry)
        if pair is not None:
            yield copy_access(*pair, index=index)
