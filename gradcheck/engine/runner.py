"""Run a scenario's forward/backward loop repeatedly and record what happened: a Trace.

Each pass, exactly as a user's training loop would:
restore params → fresh tape → forward() under the tape → backward (scenario's, or
tape.backward(loss)) → read gradients → after_backward() → collect every gradient buffer the
tape can reach → the scenario's zero step (default tape.zero()) → zero audit of those buffers.

Params are restored from a snapshot taken after setup, so every pass sees the same inputs and
any difference between passes is the program's, not the tool's.
"""

from __future__ import annotations

import contextlib
import contextvars
import gc
import math
import time
from collections.abc import Callable, Mapping

from gradcheck.engine.interrupts import Interrupted, ending
from gradcheck.model.errors import ScenarioError, UsageError
from gradcheck.model.options import BlameMode, FDMode, FDOptions
from gradcheck.model.trace import (
    FDResult,
    ParamPass,
    ParamTrace,
    PassRecord,
    ReplayResult,
    Survivor,
    Trace,
    losses_repeat,
)
from gradcheck.probes.allocations import AllocationLedger
from gradcheck.probes.finite_diff import StateSnapshot, run_fd
from gradcheck.probes.gradients import GradientReader, equality_tolerance
from gradcheck.probes.input_watch import InputWatch
from gradcheck.probes.naming import ArrayNames, label_launch_arguments, walk
from gradcheck.probes.reachability import LaunchLabel, reachable_gradients
from gradcheck.probes.replay_probe import fingerprint
from gradcheck.probes.stats import StatsPlan
from gradcheck.probes.struct_audit import Observation, StructAuditor, pointer_issue
from gradcheck.probes.tape_arguments import TapeArguments
from gradcheck.probes.warp_compat import (
    array_class,
    backward_disabled,
    first_use_label,
    is_array,
    is_array_var,
    is_float_array,
    is_struct_instance,
    is_struct_type,
    kernel_launches,
    load_warp,
    scalars_per_element,
    struct_fields,
    struct_mirror,
    struct_records,
    tape_launches,
)

Progress = Callable[[str, int, int], None]  # (scenario name, pass index, passes)


def run_passes(
    scenario,
    *,
    name: str,
    device: str,
    passes: int,
    fault: str | None = None,
    options: Mapping[str, str] | None = None,
    progress: Progress | None = None,
    ledger: AllocationLedger | None = None,
    clip_norm: float | None = None,
    fd: FDOptions | None = None,
    replay: bool = False,
    blame: BlameMode = BlameMode.off,
) -> Trace:
    """Set up ``scenario`` and run ``passes`` passes. ``ledger``: an installed AllocationLedger to use
    (tests pass a quarantining one); by default one is installed around setup and the passes."""
    wp = load_warp()
    options = dict(options or {})
    tolerance = equality_tolerance(device)
    own_ledger = ledger is None
    ledger = ledger or AllocationLedger().install()
    try:
        with wp.ScopedDevice(device):
            _setup(scenario, name, device, fault, options)
            params = _params(scenario, name)
            snapshots = {key: wp.clone(arr, requires_grad=False) for key, arr in params.items()}
            # the state the first pass starts from, for finite-difference rollouts to start from too
            state = _state_snapshot(scenario, params) if fd is not None and fd.mode is not FDMode.off else None
            value_norms = _value_norms(snapshots)
            with _frozen_heap():
                loop = _PassLoop(scenario, name, device, snapshots, GradientReader(tolerance), ledger, progress)
                loop.clip_norm = clip_norm
                for index in range(1, passes + 1):
                    token = _CURRENT_PASS.set((index, passes))
                    try:
                        loop.run_pass(index, passes)
                    except ScenarioError as exc:
                        if not loop.records:
                            raise
                        # the passes that finished are still checked and reported, beside the error
                        partial = _trace(scenario, name, device, fault, options, params, loop, value_norms, wp)
                        raise PassFailed(str(exc), partial) from exc
                    finally:
                        _CURRENT_PASS.reset(token)
            params = _params(scenario, name)
            repeats = losses_repeat([r.loss for r in loop.records], tolerance)
            carried = None if repeats else _carried_state(scenario, name, params, snapshots)
            fd_result = _finite_differences(scenario, name, params, snapshots, state, loop, fd)
            launch_checks = _blame(scenario, name, params, snapshots, state, loop, fd, fd_result, blame)
            replay_result = _replay(scenario, name, device, snapshots, loop, tolerance) if replay else None
    finally:
        if own_ledger:
            ledger.uninstall()

    return _trace(
        scenario,
        name,
        device,
        fault,
        options,
        params,
        loop,
        value_norms,
        wp,
        fd=fd_result,
        replay=replay_result,
        carried_state=carried,
        launch_checks=launch_checks,
    )


def _setup(scenario, name: str, device: str, fault, options: dict) -> None:
    """setup() with the --set options. A ValueError from setup() when options were given is the option's
    fault, not the scenario's (``steps=abc``, ``steps=-3``): a usage error (exit 2) naming the options."""
    try:
        _call(name, "setup", scenario.setup, device, fault=fault, **options)
    except ScenarioError as exc:
        cause = exc.__cause__
        if options and isinstance(cause, ValueError):
            given = " ".join(f"--set {k}={v}" for k, v in options.items())
            raise UsageError(f"{name}: setup() rejected {given}: {cause}; give a valid value") from cause
        raise


class PassFailed(ScenarioError):
    """A hook failed on pass k > 1: the error, with the Trace of the passes that finished."""

    def __init__(self, message: str, trace: Trace) -> None:
        super().__init__(message)
        self.trace = trace


def _trace(scenario, name, device, fault, options, params, loop, value_norms, wp, **probes) -> Trace:
    param_traces = tuple(
        ParamTrace(
            name=key,
            subject=loop.subjects.get(key, key + ".grad"),
            shape=tuple(arr.shape),
            dtype=_dtype_name(arr.dtype),
            passes=tuple(loop.stats[key]),
            value_norm=value_norms.get(key, float("nan")),
        )
        for key, arr in params.items()
        if loop.stats.get(key)
    )
    return Trace(
        scenario=name,
        fault=fault,
        device=device,
        options=options,
        params=param_traces,
        passes=tuple(loop.records),
        tolerance=loop.reader.tolerance,
        zero_step="scenario.zero(tape)" if callable(getattr(scenario, "zero", None)) else "tape.zero()",
        warp_version=str(getattr(wp, "__version__", "")),
        clip_norm=loop.clip_norm,
        no_backward_kernels=loop.no_backward_kernels,
        changed_before_backward=loop.changed_inputs,
        **probes,
    )


@contextlib.contextmanager
def _frozen_heap():
    """Move everything setup() built into the GC's permanent generation for the passes.

    The model, states and Warp/Newton modules live for the whole run and are never garbage during the
    passes, yet every full collection would traverse them again: with Newton loaded one costs ~0.2 s,
    about one pass, and lands every ~20 passes. Unfrozen (and collectable again) afterwards.
    """
    freeze = getattr(gc, "freeze", None)
    if freeze is None or not gc.isenabled():
        yield
        return
    gc.collect()
    freeze()
    try:
        yield
    finally:
        gc.unfreeze()


class _PassLoop:
    """State carried from pass to pass: pass-1 gradients, per-param stats, records."""

    def __init__(self, scenario, name, device, snapshots, reader: GradientReader, ledger, progress):
        self.scenario, self.name, self.device = scenario, name, device
        self.snapshots, self.reader, self.ledger, self.progress = snapshots, reader, ledger, progress
        self.arguments = TapeArguments()  # this pass's kernel arguments, reused while passes pass the same objects
        self.watch_structs: bool | None = None  # decided on pass 1: re-walk for structs on every pass?
        self.audit_plan = StatsPlan()  # the zero audit's buffers are usually the same every pass
        self.clip_norm: float | None = None
        self.clip_plan = StatsPlan()
        self.stats: dict[str, list[ParamPass]] = {key: [] for key in snapshots}
        self.subjects: dict[str, str] = {}
        self.records: list[PassRecord] = []
        self.no_backward_kernels: tuple[str, ...] = ()  # read on pass 1: gradients do not flow through these
        self.residue: dict = {}  # the last zero audit's survivors: subject → (gradient buffer, fingerprint)
        # did backward run on the tape gradcheck recorded? A scenario's own backward may use its own tapes instead
        self.tape_backward_ran = False
        self.changed_inputs = None  # pass 1, when the scenario has its own backward: see InputWatch

    def run_pass(self, index: int, passes: int) -> None:
        import warp as wp

        scenario, name, device = self.scenario, self.name, self.device
        started = time.perf_counter()
        _restore(_params(scenario, name), self.snapshots)
        tape = wp.Tape()
        with tape:
            loss = _call(name, "forward", scenario.forward)
        self.arguments.update(tape)
        if index == 1:
            launches = kernel_launches(tape_launches(tape))
            self.no_backward_kernels = tuple(sorted({k.key for _, k, _ in launches if backward_disabled(k)}))
        lazy = _LazyNames(scenario, tape, _params(scenario, name), self.snapshots)
        # struct mirrors and records are judged before backward: a dangling pointer must never be written
        observations = self._audit_pointers(self.arguments, lazy, index == 1)
        dangling = [o for o in observations if o.check == "dangling-adjoint" and o.in_tape]
        skipped = None
        if dangling:
            skipped = f"dangling adjoint pointer at {dangling[0].subject}" + (
                f" and {len(dangling) - 1} more" if len(dangling) > 1 else ""
            )
        seeds: tuple = ()
        if not dangling:
            # a scenario's own backward code runs between forward() and tape.backward: watch what it changes
            watch = InputWatch(tape) if index == 1 and callable(getattr(scenario, "backward", None)) else None
            seeds, ran = _backward(scenario, name, tape, loss, before=watch.check if watch else None)
            if watch is not None:
                self.changed_inputs = watch.results(lambda a: lazy().name(a) or _argument_name(tape, a))
            self.tape_backward_ran = self.tape_backward_ran or ran
        wp.synchronize_device(device)
        # the last pass's survivors that this backward left bit-identical: refilled with the same values (a seed
        # the scenario's backward fills) or not touched; either way nothing accumulated in them
        kept = tuple(s for s, (grad, fp) in self.residue.items() if not dangling and fingerprint(grad) == fp)
        params = _params(scenario, name)
        unknown = [key for key in params if key not in self.stats]
        if unknown:
            raise ScenarioError(
                f"{name}: params() returned a new key {unknown[0]!r} on pass {index}; return the same names on every call"
            )
        measured = self.reader.measure(params)
        if not self.subjects:
            self.subjects = {
                key: lazy().name(arr.grad) or lazy().name(arr, key) + ".grad" for key, arr in params.items()
            }
        readout = {}
        if callable(getattr(scenario, "after_backward", None)):
            _call(name, "after_backward", scenario.after_backward)
            readout = self.reader.readout(params)  # what the user's loop reads, e.g. after an optimizer step
        clipped, clip_total = {}, None
        if self.clip_norm:  # gradcheck's own clip, after the readout the mutated-gradient check compares
            clipped, clip_total = self._clip(params)
        for key, stats in measured.items():
            self.stats[key].append(self.reader.record(key, stats, readout.get(key), clipped.get(key)))
        # what the zero step must clear, collected before it runs (tape.reset() empties tape.launches)
        reachable = reachable_gradients(tape, params, lazy, self.arguments)
        if callable(getattr(scenario, "zero", None)):
            _call(name, "zero", scenario.zero, tape)
        else:
            tape.zero()
        wp.synchronize_device(device)
        # the default backward re-seeds loss.grad with fill_(1.0), so a leftover there cannot accumulate
        reseeded = loss.grad if not callable(getattr(scenario, "backward", None)) else None
        seeded = {seed.grad.ptr for seed in seeds if seed.grad is not None}
        survivors, audited, self.residue = _zero_audit(
            reachable, lazy, device, self.audit_plan, skip=reseeded, seeded=seeded
        )
        pointer_issues = tuple(pointer_issue(o) for o in observations)
        self.records.append(
            PassRecord(
                index=index,
                loss=_scalar(loss),
                launches=len(tape.launches),
                audited_buffers=audited,
                survivors=survivors,
                seconds=time.perf_counter() - started,
                pointer_issues=pointer_issues,
                backward_skipped=skipped,
                clip_total=clip_total,
                kept_by_backward=kept,
            )
        )
        if self.progress is not None:
            self.progress(name, index, passes)

    def _clip(self, params: dict):
        """--clip-norm: clip the params' gradients together; (per-param stats after, (total before, after))."""
        import warnings

        from gradcheck.clip import clip_grad_norm

        with_grad = [a for a in params.values() if getattr(a, "grad", None) is not None]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # non-finite gradients: the nonfinite check reports
            before = clip_grad_norm(with_grad, self.clip_norm) if with_grad else 0.0
        after = self.reader.readout(params, self.clip_plan)
        total_after = math.sqrt(sum(s.sumsq for s in after.values() if s is not None))
        return after, (before, total_after)

    def _audit_pointers(self, arguments: TapeArguments, lazy: _LazyNames, first_pass: bool) -> list[Observation]:
        """Stale and dangling pointers in the structs the tape uses and, when they matter, the scenario's."""
        tape_roots = arguments.struct_roots
        if not tape_roots and not first_pass and not self.watch_structs:
            return []
        names = lazy()
        scenario_roots = [(path, obj, False) for path, obj in names.structs.values()]
        scenario_roots += [(names.name(a), a, False) for a in names.arrays if _is_struct_array(a)]
        if first_pass:
            self.watch_structs = bool(tape_roots) or any(_gradient_relevant(obj) for _, obj, _ in scenario_roots)
        roots = [(_root_name(v, names, lazy), v, True) for v in tape_roots] + scenario_roots
        return StructAuditor(names, self.ledger).audit(roots)


def _finite_differences(scenario, name, params, snapshots, state, loop, options: FDOptions | None):
    """FD check against the first pass's gradients (device copies kept by the reader), with every rollout
    starting from the state the first pass started from (``state``, see _state_snapshot)."""
    if options is None or options.mode is FDMode.off:
        return None
    if any(r.backward_skipped for r in loop.records):
        return FDResult(mode=options.mode.value, skipped="backward was not launched (see dangling-adjoint)")
    grads = {key: ref.numpy().astype("float64") for key, ref in loop.reader.references().items() if key in params}
    first_loss = loop.records[0].loss if loop.records else None
    try:
        return _call(
            name, "forward (finite differences)", run_fd, scenario, params, snapshots, grads, options, state, first_loss
        )
    finally:  # leave the program as the first pass found it
        _restore_all(state, params, snapshots)


def _carried_state(scenario, name, params, snapshots):
    """The loss changed at fixed params: find the arrays that carry state between forward() calls."""
    from gradcheck.probes.state_probe import carried_state

    names = walk(scenario)
    held = _held_arrays(scenario, params, names)
    roots, _losses = _call(
        name, "forward (state probe)", carried_state, scenario, lambda: _restore(params, snapshots), held, names.name
    )
    return roots


def _blame(scenario, name, params, snapshots, state, loop, fd: FDOptions | None, fd_result, mode: BlameMode):
    """The per-launch adjoint test (gradcheck.probes.launch_check): with --blame always, or by itself when the
    finite differences found a converged disagreement, to name the launch responsible."""
    from gradcheck.model.trace import BlameResult

    options = fd if fd is not None else FDOptions()
    fired = fd_result is not None and fd_result.disagrees
    if mode is BlameMode.off or (mode is BlameMode.auto and not fired):
        return None
    why = "--blame always" if mode is BlameMode.always else "fd-mismatch fired"
    if any(r.backward_skipped for r in loop.records):
        return BlameResult(why=why, skipped="backward was not launched (see dangling-adjoint)")
    if not loop.tape_backward_ran:
        return BlameResult(why=why, skipped="the scenario's backward never runs backward on the tape of forward()")
    from gradcheck.probes import launch_check

    def restore():
        _restore_all(state, params, snapshots)

    started = time.perf_counter()
    try:
        restore()
        recorder, tape, _loss = _call(name, "forward (blame probe)", launch_check.record_forward, scenario)
        names = {id(arr): key for key, arr in params.items()}
        recorded = launch_check.check_recorded_functions(tape, recorder.functions, names)
        direction = fd_result.culprit_direction if fd_result is not None else None
        tangents = _call(
            name,
            "forward (blame probe)",
            launch_check.record_tangents,
            scenario,
            params,
            restore,
            recorder,
            direction=direction,
        )
        verdicts = launch_check.check_launches(recorder, list(params.values()), options, tangents=tangents)
        verdicts += recorded
    except Exception as exc:  # noqa: BLE001 - a probe that cannot replay this program must not cost its report
        return BlameResult(why=why, skipped=f"the probe failed: {type(exc).__name__}: {str(exc)[:200]}")
    finally:
        restore()
    note = None
    if recorder.over_budget_at is not None:
        note = f"copies of forward values over {launch_check.COPY_BUDGET_BYTES >> 20} MiB from launch #{recorder.over_budget_at} on: later launches not checked"
    return BlameResult(tuple(verdicts), why, None, note, time.perf_counter() - started)


STATE_BUDGET_BYTES = 512 * 2**20  # copies of the program's state kept for finite differences, at most


def _state_snapshot(scenario, params: dict) -> StateSnapshot:
    """Copies of every array the scenario holds (params and gradients aside), taken before the first pass.

    The pass-1 gradient is the derivative of the loss *from this state*. A forward may change state it does
    not rebuild: Warp's checkpointed fluid example copies each segment's end into the start arrays
    (``density_arrays[0]``), which its own backward puts back, so forward-only rollouts would each start from
    where the last one ended. Restoring this state before every rollout makes finite differences compare the
    function the tape differentiated. Over the budget nothing is copied and the FD result says so."""
    held = _held_arrays(scenario, params)
    total = sum(max(int(getattr(a, "capacity", 0) or 0), 0) for a in held.values())
    if total > STATE_BUDGET_BYTES:
        budget = STATE_BUDGET_BYTES // 2**20
        return StateSnapshot(
            (),
            f"not restored between rollouts: the program holds {total / 2**20:.0f} MiB of arrays, over the {budget} MiB kept for copies",
        )
    import warp as wp

    pairs = []
    for array in held.values():
        try:
            pairs.append((array, wp.clone(array, requires_grad=False)))
        except Exception:  # noqa: BLE001 - an array Warp cannot clone (exotic dtype, foreign memory) stays as is
            continue
    return StateSnapshot(tuple(pairs), None)


def _held_arrays(scenario, params: dict, names: ArrayNames | None = None) -> dict:
    """id → array of every array the scenario holds, params and gradient buffers left out."""
    names = names or walk(scenario)
    mine = {id(a) for a in params.values()} | {id(a.grad) for a in params.values() if a.grad is not None}
    return {
        id(a): a
        for a in names.arrays
        if id(a) not in mine and a.ptr and not (names.name(a) or "").endswith(".grad")  # gradients: other checks
    }


def _replay(scenario, name, device, snapshots, loop, tolerance):
    """Write-after-read and reentrancy probe: one fingerprinted forward, two backward passes."""
    import numpy as np
    import warp as wp

    from gradcheck.probes.replay_probe import analyse, fingerprint, make_fingerprint_tape

    if any(r.backward_skipped for r in loop.records):
        return ReplayResult(skipped="backward was not launched (see dangling-adjoint)")
    if not loop.tape_backward_ran:
        return ReplayResult(
            skipped="the scenario's backward never runs backward on the tape of forward() (it records its own "
            "tapes, e.g. checkpointed segments), so rewrites on that tape cannot reach the gradient"
        )
    with wp.ScopedDevice(device):
        params = _params(scenario, name)
        _restore(params, snapshots)
        tape = make_fingerprint_tape(_held_arrays(scenario, {}))
        with tape:
            loss = _call(name, "forward (replay probe)", scenario.forward)
        lazy = _LazyNames(scenario, tape, params, snapshots)
        reachable = reachable_gradients(tape, params, lazy)

        def zero_all():
            tape.zero()
            for grad in reachable.grads:
                grad.zero_()

        def name_of(array):
            return lazy().name(array) or LaunchLabel(tape_launches(tape), array)()

        def grads():
            return {k: np.array(a.grad.numpy(), dtype=np.float64) for k, a in params.items() if a.grad is not None}

        arrays = list(tape.arrays.values())
        zero_all()
        before = [fingerprint(a) for a in arrays]
        _backward(scenario, name, tape, loss)
        first = grads()
        changed = [a for a, fp in zip(arrays, before) if fingerprint(a) != fp]
        zero_all()
        _backward(scenario, name, tape, loss)
        second = grads()
        diff, worst = 0.0, None
        for key, g1 in first.items():
            g2 = second[key]
            scale = max(float(np.linalg.norm(g1)), 1e-30)
            d = float(np.linalg.norm(g2 - g1)) / scale if np.all(np.isfinite(g1)) and np.all(np.isfinite(g2)) else 0.0
            exact = np.array_equal(g1, g2, equal_nan=True)
            if not exact and d >= diff:
                diff, worst = d, key
        reentrant = worst is not None and diff > tolerance
        hazards, identical = analyse(tape, name_of)
        zero_all()
        _restore(params, snapshots)
        wp.synchronize_device(device)
    return ReplayResult(
        hazards=hazards,
        identical=identical,
        reentrant=reentrant,
        grad_diff=diff,
        worst_param=loop.subjects.get(worst, f"{worst}.grad") if worst else None,
        changed_during_backward=tuple(dict.fromkeys(name_of(a) for a in changed)),
        launches=len(tape.launches),
    )


def _value_norms(snapshots: dict) -> dict[str, float]:
    """L2 norm of each param's initial values (the loss scale a gradient is compared with)."""
    from gradcheck.probes.stats import StatsPlan

    keys = [k for k, a in snapshots.items() if is_float_array(a)]
    rows = StatsPlan().table([snapshots[k] for k in keys]).rows() if keys else []
    return {k: r.norm for k, r in zip(keys, rows)}


def _is_struct_array(value) -> bool:
    return isinstance(value, array_class()) and is_struct_type(value.dtype)


def _gradient_relevant(obj) -> bool:
    """Does a struct instance or array of structs carry any gradient pointer (mirror or live)?"""
    if _is_struct_array(obj):
        return any(_record_has_grad(record) for _, record in struct_records(obj))
    mirror = struct_mirror(obj)
    for name, value, var in struct_fields(obj):
        if is_array_var(var):
            if int(getattr(mirror, name).grad or 0) or (value is not None and value.grad is not None):
                return True
        elif is_struct_instance(value) and _gradient_relevant(value):
            return True
    return False


def _record_has_grad(record: dict) -> bool:
    for _var, value in record.values():
        if isinstance(value, dict):
            if _record_has_grad(value):
                return True
        elif getattr(value, "grad", 0):
            return True
    return False


def _root_name(value, names: ArrayNames, lazy) -> str:
    found = names.structs.get(id(value))
    if found is not None:
        return found[0]
    return names.name(value) or _launch_label_for(value, lazy)


def _launch_label_for(value, lazy) -> str:
    return LaunchLabel(tape_launches(lazy.tape), value)()


class _LazyNames:
    """Walks the scenario for names only when a name is actually needed."""

    def __init__(self, scenario, tape, params, snapshots=None):
        self._args = (scenario, tape, params, snapshots or {})
        self.tape = tape
        self._names: ArrayNames | None = None

    def __call__(self) -> ArrayNames:
        if self._names is None:
            scenario, tape, params, snapshots = self._args
            names = walk(scenario)
            for key, arr in params.items():
                if names.name(arr) is None:
                    names.add(arr, key)
                    if arr.grad is not None:
                        names.add(arr.grad, key + ".grad")
            # gradcheck's own allocations can receive a freed address too: say so rather than "unnamed array"
            for key, snapshot in snapshots.items():
                names.add(snapshot, f"gradcheck's saved copy of {key}")
            label_launch_arguments(tape, names)
            self._names = names
        return self._names


def _zero_audit(buffers, names: _LazyNames, device: str, plan, skip=None, seeded=frozenset()):
    """Every reachable gradient buffer must be zero now: one stats launch over all of them. Returns the
    survivors, the number of buffers audited, and subject → (buffer, fingerprint) of the survivors, for the next
    pass to see whether its backward added to them."""
    survivors, residue = [], {}
    table = plan.table(buffers.grads, device=device)
    for i in table.nonzero_indices():
        stats = table.row(i)
        grad = buffers.grads[i]
        if skip is not None and grad.ptr == skip.ptr:
            continue
        buffer = buffers.buffer(i)
        survivors.append(
            Survivor(
                subject=buffer.subject(names()),
                reached_via=buffer.reached_via,
                norm=stats.norm,
                nonzero=stats.nonzero,
                size=stats.size,
                aliases=tuple(buffer.aliases),
                seeded=grad.ptr in seeded,
            )
        )
        residue[survivors[-1].subject] = (grad, fingerprint(grad))
    return tuple(survivors), len(buffers), residue


def _argument_name(tape, array) -> str:
    return first_use_label(tape_launches(tape), array) or f"array at 0x{array.ptr:x}"


def _backward(scenario, name, tape, loss, before=None) -> tuple[tuple, bool]:
    """Run the scenario's backward (or ``tape.backward(loss)``). Returns the arrays it seeded with
    ``tape.backward(grads=...)``, whose gradients the zero step must clear as well (warp#407), and whether
    backward ran on this tape at all (a checkpointing scenario records and runs its own tapes instead)."""
    if not callable(getattr(scenario, "backward", None)):
        _check_loss(name, loss)
        _call(name, "backward", tape.backward, loss)
        return (), True
    seeds: dict[int, object] = {}
    calls = []
    original = tape.backward

    def recording(*args, **kwargs):
        if before is not None:
            before()
        calls.append(True)
        grads = kwargs.get("grads", args[1] if len(args) > 1 else None)
        for array in grads or {}:
            seeds[id(array)] = array
        return original(*args, **kwargs)

    tape.backward = recording  # on this tape instance only, for the duration of the scenario's backward
    try:
        _call(name, "backward", scenario.backward, tape, loss)
    finally:
        del tape.backward
    return tuple(seeds.values()), bool(calls)


def _check_loss(name: str, loss) -> None:
    """The default backward needs a one-element loss that requires grad: say so before Warp does."""
    if not is_array(loss):
        raise ScenarioError(
            f"{name}: forward() returned {type(loss).__name__}, not a wp.array; return the scalar loss array "
            "(or define backward(tape, output) to seed the tape yourself)"
        )
    if loss.size != 1 or scalars_per_element(loss.dtype) != 1:
        raise ScenarioError(
            f"{name}: the loss returned by forward() has shape {tuple(loss.shape)} and dtype {_dtype_name(loss.dtype)}; "
            "the default backward needs a one-element scalar loss: reduce it in a kernel, "
            "or define backward(tape, output) and call tape.backward(grads=...)"
        )
    if not loss.requires_grad:
        raise ScenarioError(
            f"{name}: the loss returned by forward() has requires_grad=False; allocate it with requires_grad=True"
        )


def _params(scenario, name: str) -> dict:
    params = _call(name, "params", scenario.params)
    if not isinstance(params, Mapping):
        raise ScenarioError(
            f"{name}: params() returned {type(params).__name__}; return a dict {{name: wp.array}} of the "
            "arrays whose gradients to check"
        )
    if not params:
        raise ScenarioError(
            f"{name}: params() returned an empty dict, so no gradient would be checked; return {{name: wp.array}} "
            "with the arrays (requires_grad=True) whose gradients to check"
        )
    for key, value in params.items():
        if not is_array(value):
            raise ScenarioError(
                f"{name}: params()[{key!r}] is {type(value).__name__}, not a wp.array; "
                "return only Warp arrays allocated with requires_grad=True"
            )
    return dict(params)


def _restore_all(state: StateSnapshot | None, params: dict, snapshots: dict) -> None:
    """The program's held arrays as the first pass found them (when kept), then every param."""
    if state is not None:
        state.restore()
    _restore(params, snapshots)


def _restore(params: dict, snapshots: dict) -> None:
    import warp as wp

    for key, arr in params.items():
        snap = snapshots.get(key)
        if snap is not None and snap.shape == arr.shape and snap.dtype == arr.dtype:
            wp.copy(arr, snap)


_CURRENT_PASS: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar("gradcheck_pass", default=None)


def _call(name: str, phase: str, fn, /, *args, **kwargs):
    """Call a scenario hook; what it raises becomes a ScenarioError naming the hook (and the pass). SystemExit and
    a KeyboardInterrupt the scenario raised itself too: a scenario must not end gradcheck (exit 0 with nothing
    checked, or its own status). The user's Ctrl-C (``Interrupted``) goes through."""
    try:
        return fn(*args, **kwargs)
    except (ScenarioError, Interrupted):
        raise
    except Exception as exc:
        raise ScenarioError(
            f"{name}: {phase}() raised {type(exc).__name__}{_on_pass()}: {exc}; fix the scenario "
            "(--debug shows the traceback)"
        ) from exc
    except (SystemExit, KeyboardInterrupt) as exc:
        raise ScenarioError(
            f"{name}: {phase}() raised {ending(exc)}{_on_pass()}; a scenario must return or raise an exception, "
            "not end the process: fix the scenario (--debug shows the traceback)"
        ) from exc


def _on_pass() -> str:
    current = _CURRENT_PASS.get()
    return f" on pass {current[0]} of {current[1]}" if current else ""


def _scalar(loss) -> float | None:
    if is_array(loss) and loss.size == 1:
        try:
            return float(loss.numpy().reshape(-1)[0])
        except (TypeError, ValueError):
            return None
    return None


def _dtype_name(dtype) -> str:
    return getattr(dtype, "__name__", None) or str(dtype)
