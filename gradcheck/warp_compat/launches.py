"""Tape entries: kernel launches (kernel, inputs, outputs, metadata) and ``record_func`` callables.

A kernel entry of ``tape.launches`` is a list ``[kernel, dim, max_blocks, inputs, outputs, device, block_dim,
metadata]`` on every release from 1.5.1 to 1.19 (``dim`` an int before 1.19, a tuple since); entries added with
``tape.record_func`` are callables.
"""

from __future__ import annotations

import functools
import inspect
import sys
from itertools import chain

# Indexes, not unpacking: the hot loops read only these.
LAUNCH_KERNEL, LAUNCH_INPUTS, LAUNCH_OUTPUTS, LAUNCH_METADATA = 0, 3, 4, 7


def argument_label(kernel, position: int) -> str:
    """``kernel.argument`` label of a launch argument (position over inputs then outputs)."""
    args = getattr(getattr(kernel, "adj", None), "args", ())
    arg = args[position].label if position < len(args) else f"arg{position}"
    return f"{getattr(kernel, 'key', kernel)}.{arg}"


def tape_gradient_keys(tape):
    """Arrays and structs the tape knows gradients for (kernel args after backward, record_func arrays)."""
    return list(getattr(tape, "gradients", {}).keys())


# -- tape launches ------------------------------------------------------------------------------------


def tape_launches(tape) -> list:
    """The tape's launch list itself (kernel entries and record_func callables), in launch order.

    Kept by reference: ``tape.reset()`` binds a new list, so a saved one still lists this forward's launches."""
    return tape.launches


def kernel_launches(launches):
    """(index, kernel, arguments) for each kernel entry; arguments are inputs then outputs, in
    ``kernel.adj.args`` order. record_func entries (callables) are skipped."""
    for index, entry in enumerate(launches):
        if entry.__class__ is list:
            yield index, entry[LAUNCH_KERNEL], chain(entry[LAUNCH_INPUTS], entry[LAUNCH_OUTPUTS])


def launch_sites(launches) -> dict[int, str | None]:
    """Index → where each kernel entry was launched from (``file:line``, from the launch metadata Warp records; None
    when it has none). What a launch reads and writes: gradcheck.tape.launch_access."""
    sites = {}
    for index, entry in enumerate(launches):
        if entry.__class__ is list:
            metadata = entry[LAUNCH_METADATA] if len(entry) > LAUNCH_METADATA else None
            caller = (metadata or {}).get("caller") if isinstance(metadata, dict) else None
            sites[index] = f"{caller['file']}:{caller['lineno']}" if caller and "file" in caller else None
    return sites


def takes_object_ids(kernel) -> bool:
    """Whether the kernel takes a ``wp.uint64`` argument: an object id (hash grid, mesh, BVH, volume), a raw handle
    only valid where the program made it valid (a captured graph may rebuild the object when it replays)."""
    import warp as wp

    return any(getattr(arg, "type", None) is wp.uint64 for arg in getattr(getattr(kernel, "adj", None), "args", ()))


def launch_io(launches):
    """(index, kernel, inputs, outputs) for each kernel entry, as the launch listed them."""
    for index, entry in enumerate(launches):
        if entry.__class__ is list:
            yield index, entry[LAUNCH_KERNEL], entry[LAUNCH_INPUTS], entry[LAUNCH_OUTPUTS]


def replayable_launches(launches):
    """(index, kernel, dim, inputs, outputs, options) for each kernel entry, ``options`` what ``wp.launch`` needs
    to run it again as it ran (device, max_blocks, and block_dim where this Warp has it)."""
    for index, entry in enumerate(launches):
        if entry.__class__ is list:
            options = {"device": entry[5], "max_blocks": entry[2]}
            if launch_accepts("block_dim") and len(entry) > 6 and entry[6]:
                options["block_dim"] = entry[6]
            yield index, entry[LAUNCH_KERNEL], entry[1], entry[LAUNCH_INPUTS], entry[LAUNCH_OUTPUTS], options


def recorded_copy(entry):
    """(dest, src) of the adjoint ``warp.copy`` records on the tape (whole array or not: offsets and counts), else
    None. Read from the closure of the lambda it records."""
    code = getattr(entry, "__code__", None)
    if code is None or not getattr(entry, "__qualname__", "").startswith("copy."):
        return None
    cells = getattr(entry, "__closure__", None) or ()
    names = dict(zip(code.co_freevars, (c.cell_contents for c in cells)))
    if "dest" in names and "src" in names:
        return names["dest"], names["src"]
    return None


def recorded_functions(launches):
    """(index, backward, copy) for each ``record_func`` entry on a tape; ``copy`` is (dest, src) when the entry is
    the adjoint ``wp.copy`` records for a whole-array copy (also behind ``wp.clone`` and ``array.assign``), else
    None."""
    for index, entry in enumerate(launches):
        if entry.__class__ is list or not callable(entry):
            continue
        pair = recorded_copy(entry)
        yield index, entry, pair if pair is not None and _whole(entry, *pair) else None


def _whole(entry, dest, src) -> bool:
    """The recorded copy covers both arrays entirely (no offsets, the count of both sizes)."""
    code, cells = entry.__code__, entry.__closure__ or ()
    names = dict(zip(code.co_freevars, (c.cell_contents for c in cells)))
    count = names.get("count") or 0
    return (
        not names.get("dest_offset")
        and not names.get("src_offset")
        and (count == 0 or count == getattr(src, "size", -1) == getattr(dest, "size", -2))
    )


class RecordedCall:
    """A recorded kernel entry of a tape seen as the ``wp.launch`` call that made it (what hooks.LaunchCall gives
    for a live launch): the kernel, its arguments by name, and the options a replay needs."""

    def __init__(self, entry: list) -> None:
        self._entry = entry

    @property
    def kernel(self):
        return self._entry[LAUNCH_KERNEL]

    def arguments(self) -> list[tuple[str, object]]:
        labels = [arg.label for arg in getattr(getattr(self.kernel, "adj", None), "args", ())]
        values = [*self._entry[LAUNCH_INPUTS], *self._entry[LAUNCH_OUTPUTS]]
        return [(labels[i] if i < len(labels) else f"arg{i}", v) for i, v in enumerate(values)]

    def get(self, name: str, default=None):
        entry = self._entry
        block_dim = entry[6] if len(entry) > 6 and launch_accepts("block_dim") else None
        known = {"dim": entry[1], "max_blocks": entry[2], "device": entry[5], "block_dim": block_dim}
        return known.get(name, default) if known.get(name) is not None else default

    def options(self) -> dict:
        return {"device": self._entry[5], "max_blocks": self._entry[2], "block_dim": self.get("block_dim")}


def recorded_call(entry: list) -> RecordedCall:
    return RecordedCall(entry)


def backward_disabled(kernel) -> bool:
    """Whether the kernel was built with ``enable_backward=False`` (its own option, else its module's), as
    Warp's Tape.backward itself decides when it warns."""
    flag = (getattr(kernel, "options", None) or {}).get("enable_backward")
    if flag is None:
        flag = (getattr(getattr(kernel, "module", None), "options", None) or {}).get("enable_backward")
    return flag is False


def module_current(kernel, device) -> bool:
    """Whether the kernel's module is loaded on ``device`` as it is now: a launch replayed while it is stale
    (kernels defined in it since it last ran: warp.fem's examples define some as they go) would rebuild it inside
    gradcheck, and Warp's "Module ... load" line, the program's to print at its own next launch, would be lost.
    True where this Warp keeps no such record."""
    module = getattr(kernel, "module", None)
    execs = getattr(module, "execs", None)
    if module is None or not isinstance(execs, dict) or not hasattr(module, "get_module_hash"):
        return True
    try:
        import warp as wp

        context = wp.get_device(device).context
        return any(
            key[0] == context and exe.module_hash == module.get_module_hash(key[1]) for key, exe in execs.items()
        )
    except Exception:  # noqa: BLE001 - another Warp's layout: assume current
        return True


def launch_kernel_names(launches) -> list[str]:
    """The kernel key of each entry, ``record_func`` for recorded functions."""
    return [entry[LAUNCH_KERNEL].key if entry.__class__ is list else "record_func" for entry in launches]


def launch_argument_list(tape) -> list:
    """Every kernel argument on the tape, launch by launch: all inputs, then all outputs (repeats kept).

    ~18,000 values a pass for a 100-step Newton rollout: built by ``chain``/``itemgetter`` in C, one chain over
    all launches rather than one per launch (1,600 tracked allocations a pass would run the cyclic GC)."""
    from operator import itemgetter

    entries = [entry for entry in tape.launches if entry.__class__ is list]
    values = list(chain.from_iterable(map(itemgetter(LAUNCH_INPUTS), entries)))
    values += chain.from_iterable(map(itemgetter(LAUNCH_OUTPUTS), entries))
    return values


def first_use_label(launches, value, suffix: str = "") -> str | None:
    """``kernel.argument`` of the first launch that passed ``value``, or None."""
    for _index, kernel, arguments in kernel_launches(launches):
        for position, argument in enumerate(arguments):
            if argument is value:
                return argument_label(kernel, position) + suffix
    return None


def recording_tape(on_launch):
    """A ``wp.Tape`` that calls ``on_launch(index, kernel, inputs, outputs)`` after each kernel launch
    (Warp records a launch after running it, so the arguments hold what the launch left)."""
    import warp as wp

    class RecordingTape(wp.Tape):
        def record_launch(self, kernel, dim, max_blocks, inputs, outputs, device, block_dim=0, metadata=None):
            super().record_launch(kernel, dim, max_blocks, inputs, outputs, device, block_dim, metadata)
            on_launch(len(self.launches) - 1, kernel, inputs, outputs)

    return RecordingTape()


@functools.cache
def _launch_signature() -> tuple[dict, dict]:
    parameters = inspect.signature(_internal_launch_module().launch).parameters
    positions = {name: index for index, name in enumerate(parameters)}
    defaults = {n: p.default for n, p in parameters.items() if p.default is not inspect.Parameter.empty}
    return positions, defaults


def launch_accepts(name: str) -> bool:
    """Whether this Warp's ``wp.launch`` takes the parameter ``name`` (``block_dim`` is not on every release)."""
    return name in _launch_signature()[0]


def _internal_launch_module():
    """The module whose ``launch`` Warp's own helpers call (``warp._src.context`` on 1.19, ``warp.context`` before)."""
    import warp

    launch = warp.launch
    while hasattr(launch, "__wrapped__"):  # another observer's hook (a nested audit()) or a program's own wrapper
        launch = launch.__wrapped__
    return sys.modules[launch.__module__]
