"""Write-after-read while a tape records: an array a launch read is rewritten, with other values, by a later one.

Warp's backward replays each launch's forward code from the arrays' contents *at backward time*, so a launch whose
input a later launch overwrote (scratch memory shared by every step of a rollout, an in-place state update) is
differentiated at the later values. Seen as the forward runs, from the launches themselves:

- a launch *reads* an array when its code loads the array's values (gradcheck.warp_compat.kernel_access):
  an array a launch only accumulates into (``wp.atomic_add(loss, 0, v)``) or only stores into is not read, since
  its adjoint never needs the old values back (Newton's diffsim examples accumulate every frame into one loss);
- a later launch that may write an array read since its last write is fingerprinted before and after it runs;
  a changed fingerprint is a hazard, an unchanged one (forward kinematics recomputing the same ``body_q``) is
  listed as harmless, and so is a change the reader's adjoint cannot see: one that does not use the array's values
  (``y = 2 x``, an FFT stage: gradcheck.rerun.adjoint_dependence runs it twice on copies to tell).

Cost: two fingerprints per (launch, array it rewrites after a read), nothing for arrays written once.
"""

from __future__ import annotations

from gradcheck.model.trace import Rewrite
from gradcheck.tape.launch_access import call_access


class RewriteWatch:
    """One recording's write-after-read watch: ``before(call)`` / ``after(call, token)`` around each launch."""

    def __init__(self, fingerprint) -> None:
        self._fingerprint = fingerprint
        self._readers: dict[int, dict[str, None]] = {}  # id(array) → kernels that read its current values
        self._arrays: dict[int, object] = {}  # keeps every array seen alive: an id stays its own
        self._pairs: dict[tuple[int, str, str], list[int]] = {}  # (array, reader, writer) → [count, changed]

    def before(self, call, arguments) -> list:
        """The arrays read since their last write that this launch's code may write, fingerprinted before it runs
        (``writes``: what the code may do; a declared output its code never touches keeps its values)."""
        watched = []
        for array in call_access(call).arrays("writes"):
            if id(array) in self._readers:
                watched.append((array, self._fingerprint(array)))
        return watched

    def after(self, call, arguments, watched: list) -> None:
        from gradcheck.rerun.adjoint_dependence import adjoint_reads

        writer = getattr(call.kernel, "key", str(call.kernel))
        for array, before in watched:
            changed = self._fingerprint(array) != before
            for reader, (read_by, label) in self._readers.pop(id(array), {}).items():
                pair = self._pairs.setdefault((id(array), reader, writer), [0, 0])
                pair[0] += 1
                # a reader whose adjoint does not use the values (linear in them) is not differentiated wrong
                pair[1] += changed and adjoint_reads(read_by, label) is not False
        for use in call_access(call).arguments:
            if not use.role.reads:
                continue
            for array in use.arrays:
                self._readers.setdefault(id(array), {})[writer] = (call, use.role.name)
                self._arrays[id(array)] = array

    def results(self, name_of) -> tuple[tuple[Rewrite, ...], tuple[Rewrite, ...]]:
        """(hazards, identical rewrites), one Rewrite per (array, reader kernel, writer kernel)."""
        hazards, identical = [], []
        for (key, reader, writer), (count, changed) in self._pairs.items():
            rewrite = Rewrite(name_of(self._arrays[key]), reader, writer, count, changed > 0)
            (hazards if changed else identical).append(rewrite)
        return tuple(hazards), tuple(identical)


CAPTURED_BUDGET_BYTES = 256 * 2**20  # copies kept to replay a captured forward, at most


class _Replayed:
    """A tape's launch run again, as the watch sees a live call."""

    __slots__ = ("kernel", "inputs", "outputs")

    def __init__(self, kernel, inputs, outputs):
        self.kernel, self.inputs, self.outputs = kernel, list(inputs), list(outputs)


def replay_captured(tape, fingerprint, before_launch=None) -> RewriteWatch | str:
    """Write-after-read for a forward that was only captured into a graph (nothing ran while it recorded, so
    nothing could be watched): the tape's launches are run again, one by one, from copies of every array they
    take, with the watch around each, and every array is then put back bit for bit, so the program's own replay
    starts from exactly the state it would have. Returns the watch, or why it was not done (over the budget).
    ``before_launch(kernel, dim, inputs, outputs, options)``: told of each launch before it runs again (the default
    adjoint test copies what it reads: a launch first seen inside a capture is tested from here)."""
    import warp as wp

    from gradcheck.warp_compat import launch_sites, replayable_launches, takes_object_ids, tape_launches

    launches = list(replayable_launches(tape_launches(tape)))
    handles = sorted({entry[1].key for entry in launches if takes_object_ids(entry[1])})
    if handles:  # a hash grid or mesh the graph rebuilds as it replays: its id is not ours to dereference
        return f"its launches pass object ids (wp.uint64: hash grids, meshes) that only the graph's own replay may use ({', '.join(handles[:3])})"
    arrays = {id(a): a for *_head, inputs, outputs, _o in launches for v in [*inputs, *outputs] for a in _arrays_of(v)}
    total = sum(max(int(getattr(a, "capacity", 0) or 0), 0) for a in arrays.values())
    if total > CAPTURED_BUDGET_BYTES:
        return f"the captured forward takes {total / 2**20:.0f} MiB of arrays, over the {CAPTURED_BUDGET_BYTES >> 20} MiB kept for copies"
    saved = []
    for array in arrays.values():
        try:
            saved.append((array, wp.clone(array, requires_grad=False)))
        except RuntimeError as exc:  # CUDA refuses the copy (graph memory not mapped): nothing was run yet
            return f"an array its launches use could not be copied ({str(exc).splitlines()[0][:160]})"
    watch = RewriteWatch(fingerprint)
    sites = launch_sites(tape_launches(tape))
    try:
        for index, kernel, dim, inputs, outputs, options in launches:
            if before_launch is not None:
                before_launch(kernel, dim, inputs, outputs, {**options, "where": sites.get(index)})
            call = _Replayed(kernel, inputs, outputs)
            arguments = [(use.role.name, use.value) for use in call_access(call).arguments]
            token = watch.before(call, arguments)
            wp.launch(kernel, dim=dim, inputs=list(inputs), outputs=list(outputs), record_tape=False, **options)
            watch.after(call, arguments, token)
    finally:
        for array, copy in saved:
            wp.copy(array, copy)
    return watch


def _arrays_of(value):
    from gradcheck.warp_compat import array_class, arrays_of

    return arrays_of(value, array_class())
