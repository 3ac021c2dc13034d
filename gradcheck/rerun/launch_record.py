"""A forward's launches recorded with copies of their array arguments as they were before each ran.

Warp records a launch on the tape only after it ran, and later launches overwrite what it read; the per-launch
test (gradcheck.rerun.unit_replay) needs the values each launch really ran on. So a ``LaunchRecorder`` sees every
launch before it runs (``record_forward``: the blame probe's own forward, through
gradcheck.warp_compat.intercepted_launches; under ``exec``, the observer's launch hook: gradcheck.observe.blame_watch
and gradcheck.observe.kernel_tests) and keeps a copy of each array argument whenever it changed since its last copy,
within a memory budget (launches past it are listed as not checked). Under ``run``, two more recorded forwards give
the program's own tangent of each launch's inputs (``record_tangents``).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field

from gradcheck.measure.fingerprints import bytes_crc
from gradcheck.rerun.finite_diff import param_scale
from gradcheck.rerun.replay_buffers import HostViews
from gradcheck.tape.launch_access import launch_access

COPY_BUDGET_BYTES = 1 << 30


@dataclass
class Launch:
    index: int
    kernel: object
    dim: object
    inputs: list
    outputs: list
    options: dict
    pre: dict = field(default_factory=dict)  # id(array) → copy of its values before this launch
    where: str | None = None
    arrays_in: list = field(default_factory=list)  # every array the inputs reach (struct fields flattened)
    arrays_out: list = field(default_factory=list)  # every array the outputs reach
    reads: frozenset = frozenset()  # ids of arrays_in
    writes: frozenset = frozenset()  # ids of what it writes (``shown_write``: outputs, inputs its code stores into)
    captured: bool = False  # made while a CUDA graph was being captured: nothing could be copied
    access_known: bool = False  # the kernel's source says which inputs it writes (in writes): no others change
    accumulates: frozenset = frozenset()  # ids of arrays it only adds to (``a[i] += v``, atomic_add): never stores


class LaunchRecorder:
    """Records every launch of one forward with copies of its array arguments as they were before it ran."""

    def __init__(self, budget: int = COPY_BUDGET_BYTES, inputs_only: bool = False, keep_going: bool = False):
        # a tangent forward needs what each launch read of the tested inputs, nothing it wrote, and reads it on the
        # host: its copies (``pre``) are numpy arrays
        self.inputs_only = inputs_only
        self.keep_going = keep_going  # past the budget, later launches that fit are still copied
        self.launches: list[Launch] = []
        self.latest: dict[int, tuple[int, object]] = {}  # id → (fingerprint, copy)
        self.budget, self.used = budget, 0
        self.over_budget_at: int | None = None
        self.loss_id: int | None = None  # what forward() returned: read by whoever reads the loss
        self.seeds: tuple = ()  # the arrays a backward(grads={array: seed}) seeded: each one a loss
        self.copies: tuple = ()  # (launches before it, src, dest) of each copy on the tape (see note_copies)
        self.functions: dict[int, tuple[list, str | None]] = {}  # tape index → (record_func arrays, call site)
        self._host = HostViews()  # the arguments' host views, made once
        self._tangent_worthy: dict[int, bool] = {}  # id → whether a tangent forward copies it (see _copy)

    def recorded_func(self, index: int, arrays) -> None:
        """A ``tape.record_func(backward, arrays)`` call: Warp keeps the arrays only in a tape-wide dict, so they
        are kept here per entry, with the first call site outside Warp."""
        from gradcheck.model.sites import caller_site

        self.functions[index] = (list(arrays), caller_site())

    def before(self, kernel, dim, inputs, outputs, options, copy: bool = True, access=None) -> None:
        """A launch about to run: recorded, with copies of its arguments unless ``copy`` is False (the default
        adjoint test copies only the launches it tests, and every launch of a tape whose units it may test).
        ``access``: the launch's LaunchAccess when the caller has built it already (the observer's launch hook)."""
        from gradcheck.warp_compat import capturing

        launch = Launch(len(self.launches), kernel, dim, inputs, outputs, options)
        access = access or launch_access(kernel, inputs, outputs)
        launch.arrays_in, launch.arrays_out = access.inputs(), access.outputs()
        launch.reads = frozenset(map(id, launch.arrays_in))
        launch.access_known = access.known
        # outputs=, and inputs the code (where it could be read) writes: the rest is compared by contents
        launch.writes = frozenset(map(id, access.arrays("shown_write")))
        launch.accumulates = frozenset(
            id(use.array) for use in access.arguments if use.role.accumulates and use.array is not None
        )
        launch.where = options.get("where")  # the caller of wp.launch
        if capturing():  # a copy now would be recorded into the program's graph, not made
            launch.captured = True
        elif copy and (self.over_budget_at is None or self.keep_going):
            self._copy(launch)
        self.launches.append(launch)

    def _copy(self, launch: Launch) -> None:
        """Copies of the launch's arguments that changed since their last copy (the rest shared). Over the budget:
        none, and (unless ``keep_going``) none for any later launch either."""
        import warp as wp

        if self.inputs_only:  # only what a tangent is taken of: float numbers with an adjoint (the tested inputs)
            values = [value for value in launch.arrays_in if self._worthy(value)]
        else:
            values = launch.arrays_in + launch.arrays_out
        found, fresh = {}, {}
        for value in values:
            fp = self._crc(value)
            known = self.latest.get(id(value))
            if known is None or known[0] != fp:
                fresh[id(value)] = (value, fp)
            else:
                found[id(value)] = known[1]
        size = sum(int(getattr(value, "capacity", 0) or 0) for value, _fp in fresh.values())
        if self.used + size > self.budget:
            if self.over_budget_at is None:
                self.over_budget_at = launch.index
            return
        self.used += size
        for key, (value, fp) in fresh.items():
            # a tangent forward's copies are only ever read on the host (record_tangents): numpy, not Warp arrays
            copy = self._host_copy(value) if self.inputs_only else wp.clone(value, requires_grad=False)
            self.latest[key] = (fp, copy)
            found[key] = copy
        launch.pre = found

    def _crc(self, value) -> int:
        """``bytes_crc``, on a view of the array's bytes made once where it lives in host memory (the recorder asks
        before every launch of every argument: ``array.numpy()`` each time was most of the recording's cost)."""
        import zlib

        found = self._host.of(value)
        return bytes_crc(value) if found[2] is None else zlib.crc32(found[2])

    def _host_copy(self, value):
        """A numpy copy of the array's values (after ``_crc``, which made its host view where it has one)."""
        import numpy as np

        view = self._host.of(value)[1]
        return np.array(view if view is not None else value.numpy(), copy=True)

    def _worthy(self, value) -> bool:
        found = self._tangent_worthy.get(id(value))
        if found is None:
            from gradcheck.rerun.launch_values import has_floats

            found = self._tangent_worthy[id(value)] = bool(getattr(value, "requires_grad", False)) and has_floats(value)
        return found


def note_copies(recorder: LaunchRecorder, tape) -> None:
    """The copies recorded on ``tape`` between its launches (``wp.copy``, ``wp.clone``, ``array.assign``), as
    (launches before it, src, dest): edges of the data flow the gradient path follows (the Navier-Stokes tutorial
    joins its time steps with them). Only when the recorder saw every kernel entry of the tape (else positions
    would not match)."""
    from gradcheck.warp_compat import recorded_copy, tape_launches

    found, kernels = [], 0
    for entry in tape_launches(tape):
        if entry.__class__ is list:
            kernels += 1
            continue
        pair = recorded_copy(entry) if callable(entry) else None
        if pair is not None:
            found.append((kernels, pair[1], pair[0]))
    if kernels == len(recorder.launches):
        recorder.copies = tuple(found)


def hand_seeded(recorder: LaunchRecorder) -> tuple:
    """The arrays the recording wrote whose ``.grad`` holds something before a backward with neither a loss nor
    ``grads=``: the program seeded them by hand (``rollout_costs.grad.fill_(1.0)``), so they are its losses. Read
    once, before that backward runs. None holds anything (the seeding is inside a captured graph, Newton's drone
    example): the arrays the recording writes and nothing in it reads afterwards, its outputs."""
    import numpy as np

    from gradcheck.measure.liveness import readable

    found = {}
    for launch in recorder.launches:
        for array in launch.arrays_out:
            grad = getattr(array, "grad", None)
            if grad is None or id(array) in found or not readable(grad):  # never memory the program may have freed
                continue
            if np.any(grad.numpy()):
                found[id(array)] = array
    if found:
        return tuple(found.values())
    # seeded where Python cannot see it (inside a captured graph): the arrays written that nothing later reads
    sinks, read_later = {}, set()
    for launch in reversed(recorder.launches):
        for array in launch.arrays_out:
            if id(array) not in read_later and getattr(array, "requires_grad", False):
                sinks.setdefault(id(array), array)
        read_later |= launch.reads
    return tuple(sinks.values())


def record_forward(scenario, budget: int = COPY_BUDGET_BYTES, inputs_only: bool = False):
    """Run ``scenario.forward()`` under a tape with launches intercepted; returns (recorder, tape, loss). The
    params decide what is tested (see ``gradient_path``): pass them to check_launches."""
    import warp as wp

    from gradcheck.warp_compat import intercepted_launches

    recorder = LaunchRecorder(budget, inputs_only)
    tape = wp.Tape()
    record_func = tape.record_func

    def recording_func(backward, arrays):
        recorder.recorded_func(len(tape.launches), arrays)
        return record_func(backward, arrays)

    tape.record_func = recording_func  # on this instance only: wp.copy and user code find it as runtime.tape
    with paused_gc(), intercepted_launches(recorder.before), tape:
        loss = scenario.forward()
    recorder.loss_id = id(loss)
    note_copies(recorder, tape)
    return recorder, tape, loss


def record_tangents(
    scenario, params: dict, restore, recorder: LaunchRecorder, seed: int = 0, step: float = 1e-3, direction=None
):
    """launch index → {id(array): d(values before the launch) / dt} along a param direction (``direction``: the one
    finite differences disagreed along, key → step; else random), from two more
    recorded forwards at params +- step (relative to each param's RMS), or None when those forwards launched
    something else (a data-dependent launch sequence).

    Why not a random direction per launch: launches are only ever evaluated on inputs the program can produce.
    Newton's mass matrix is symmetric, its Cholesky reads one triangle and the solve's adjoint writes the
    full-matrix convention: correct for every symmetric perturbation, wrong for a random one. The program's own
    tangent keeps every such structure."""
    import numpy as np

    from gradcheck.warp_compat import is_float_array

    rng = np.random.default_rng(seed)
    params = {key: arr for key, arr in params.items() if is_float_array(arr)}
    base_values = {key: arr.numpy().astype(np.float64) for key, arr in params.items()}
    if direction:  # the param direction fd-mismatch disagreed along: its error is the sum of the launches'
        direction = {
            key: np.asarray(direction[key], dtype=np.float64).reshape(v.shape) if key in direction else 0.0 * v
            for key, v in base_values.items()
        }
        size = math.sqrt(sum(float(np.sum(d * d)) for d in direction.values())) or 1.0
        scale = math.sqrt(sum(param_scale(v) ** 2 for v in base_values.values()))
        direction = {key: d * scale / size for key, d in direction.items()}
    else:
        direction = {key: param_scale(v) * rng.standard_normal(v.shape) for key, v in base_values.items()}
    # one pause for both forwards and the differences (~4,000 small numpy arrays): a collection re-enabled between
    # them would walk every object the recordings hold (0.46 s for cartpole's first full one, in a fresh process)
    with paused_gc():
        runs = []
        for sign in (1.0, -1.0):
            restore()
            for key, arr in params.items():
                arr.assign((base_values[key] + sign * step * direction[key]).astype(arr.numpy().dtype))
            run, _tape, _loss = record_forward(scenario, recorder.budget, inputs_only=True)
            runs.append(run)
        restore()
        plus, minus = runs
        kernels = [launch.kernel for launch in recorder.launches]
        if any([launch.kernel for launch in run.launches] != kernels for run in runs):
            return None
        return _differences(recorder, plus, minus, step)


def _differences(recorder: LaunchRecorder, plus: LaunchRecorder, minus: LaunchRecorder, step: float) -> dict:
    """record_tangents' central differences, launch by launch, of what the two tangent forwards read."""
    from gradcheck.rerun.launch_values import float_numbers, has_floats

    tangents: dict[int, dict] = {}
    differences: dict[tuple, object] = {}  # (id of a copy up, id down) → the tangent: a copy serves many launches
    for base, up, down in zip(recorder.launches, plus.launches, minus.launches):
        # arguments match by position: the same launch in each run passes the same arrays
        entry = {}
        for value, v_up, v_down in zip(base.arrays_in, up.arrays_in, down.arrays_in):
            a, b = up.pre.get(id(v_up)), down.pre.get(id(v_down))
            if a is None or b is None or not has_floats(value):
                continue
            pair = (id(a), id(b))
            if pair not in differences:
                a, b = float_numbers(a), float_numbers(b)  # numpy copies (inputs_only)
                differences[pair] = (a - b) / (2 * step) if a.shape == b.shape else None
            if differences[pair] is not None:
                entry[id(value)] = differences[pair]
        tangents[base.index] = entry
    return tangents


@contextlib.contextmanager
def paused_gc():
    """Python's cyclic collector off while inside (and back as it was): blame makes tens of thousands of Warp
    arrays and launch objects, which trigger a full collection every few hundred; ~0.3 s of cartpole's 2.8 s."""
    import gc

    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
