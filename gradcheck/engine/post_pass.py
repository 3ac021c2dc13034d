"""What only ``gradcheck run`` can do: probes that run the scenario's forward (and backward) again after the passes.

Each probe is a small object behind one protocol: ``name`` (how a failure is reported), ``field`` (the Trace field
it fills) and ``run(context) -> result or None``. They run in order (the state probe, finite differences, the
per-launch blame, which follows the finite differences' failing direction, and the reentrancy probe), each with the
observer uninstalled: evidence about the program comes from the passes alone. A probe that raises costs only its
own result: the exception becomes an InternalError (an ``internal-error`` finding), and the scenario's own
failure during a probe's forward stays the scenario's error, with every pass's findings still reported.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from gradcheck.engine.scenario_hooks import call, restore
from gradcheck.model.errors import ScenarioError
from gradcheck.model.options import BlameMode, FDMode, FDOptions
from gradcheck.model.trace import BlameResult, FDResult, InternalError, ReplayResult, losses_repeat
from gradcheck.rerun.finite_diff import StateSnapshot

STATE_BUDGET_BYTES = 512 * 2**20  # copies of the program's state kept for finite differences, at most


@dataclass
class ProbeContext:
    """What the passes left for the probes: the scenario, its params and their snapshots, the passes' records."""

    scenario: object
    name: str
    device: str
    params: dict
    snapshots: dict
    state: StateSnapshot | None  # the program's arrays as the first pass found them (for finite differences)
    loop: object  # the PassLoop: records, tape_backward_ran
    reader: object  # the observer's GradientReader: pass-1 gradients
    subjects: dict  # param key → subject
    tolerance: float
    fd: FDOptions | None
    blame: BlameMode
    replay: bool
    gradients_moved: bool = False  # a param's gradient differed from pass 1's beyond the tolerance
    results: dict = field(default_factory=dict)  # the fields filled so far (blame reads fd's)

    def restore_all(self) -> None:
        """The program's held arrays as the first pass found them (when kept), then every param."""
        if self.state is not None:
            self.state.restore()
        restore(self.params, self.snapshots)

    @property
    def skipped_backward(self) -> bool:
        return any(r.backward_skipped for r in self.loop.records)


def run_probes(context: ProbeContext, probes=None) -> tuple[dict, tuple[InternalError, ...]]:
    """(Trace fields, internal errors) of every probe, in order."""
    errors = []
    for probe in probes or PROBES:
        try:
            result = probe.run(context)
        except ScenarioError:
            raise
        except Exception as exc:  # noqa: BLE001 - a probe that fails costs its own result, never the report
            errors.append(InternalError.of(f"probe {probe.name}", exc))
            result = None
        context.results[probe.field] = result
    return dict(context.results), tuple(errors)


class CarriedState:
    """When the loss changed at fixed params: which arrays carry state between forward() calls."""

    name, field = "stateful-forward", "carried_state"

    def run(self, c: ProbeContext):
        losses = [r.loss for r in c.loop.records]
        if losses_repeat(losses, 0.0):
            return None
        if losses_repeat(losses, c.tolerance) and not c.gradients_moved:
            return None  # CUDA's float atomics reorder sums: loss and gradients both within that noise
        from gradcheck.rerun.carried_state import carried_state
        from gradcheck.tape.naming import walk

        names = walk(c.scenario)
        held = held_arrays(c.scenario, c.params, names)
        undo = lambda: restore(c.params, c.snapshots)  # noqa: E731
        roots, _losses = call(c.name, "forward (state probe)", carried_state, c.scenario, undo, held, names.name)
        return roots


class FiniteDifferences:
    """FD check against the first pass's gradients, every rollout starting from the first pass's state."""

    name, field = "finite differences", "fd"

    def run(self, c: ProbeContext):
        from gradcheck.rerun.finite_diff import run_fd

        options = c.fd
        if options is None or options.mode is FDMode.off:
            return None
        if c.skipped_backward:
            return FDResult(mode=options.mode.value, skipped="backward was not launched (see dangling-adjoint)")
        grads = {key: ref.numpy().astype("float64") for key, ref in c.reader.references().items() if key in c.params}
        first_loss = c.loop.records[0].loss if c.loop.records else None
        try:
            return call(
                c.name, "forward (finite differences)", run_fd, c.scenario, c.params, c.snapshots, grads, options,
                c.state, first_loss,
            )  # fmt: skip
        finally:  # leave the program as the first pass found it
            c.restore_all()


class Blame:
    """The per-launch adjoint test (gradcheck.rerun.launch_check): with --blame always, or by itself when the
    finite differences found a converged disagreement, to name the launch responsible."""

    name, field = "blame", "launch_checks"

    def run(self, c: ProbeContext):
        fd_result = c.results.get("fd")
        fired = fd_result is not None and fd_result.disagrees
        if c.blame is BlameMode.off or (c.blame is BlameMode.auto and not fired):
            return None
        why = "--blame always" if c.blame is BlameMode.always else "fd-mismatch fired"
        if c.skipped_backward:
            return BlameResult(why=why, skipped="backward was not launched (see dangling-adjoint)")
        if not c.loop.tape_backward_ran:
            return BlameResult(why=why, skipped="the scenario's backward never runs backward on the tape of forward()")
        from gradcheck.rerun.launch_record import paused_gc

        started = time.perf_counter()
        try:
            with paused_gc():  # one pause for the whole probe: a collection between its steps walks every recording
                verdicts, note = self._verdicts(c, fd_result)
        except ScenarioError:
            raise
        except Exception as exc:  # noqa: BLE001 - a probe that fails on this program must not cost its report
            return BlameResult(why=why, skipped=f"the probe failed: {type(exc).__name__}: {str(exc)[:200]}")
        finally:
            c.restore_all()
        return BlameResult(tuple(verdicts), why, None, note, time.perf_counter() - started)

    @staticmethod
    def _verdicts(c: ProbeContext, fd_result):
        from gradcheck.rerun import launch_check

        options = c.fd if c.fd is not None else FDOptions()
        c.restore_all()
        recorder, tape, _loss = call(c.name, "forward (blame probe)", launch_check.record_forward, c.scenario)
        names = {id(arr): key for key, arr in c.params.items()}
        recorded = launch_check.check_recorded_functions(tape, recorder.functions, names)
        direction = fd_result.culprit_direction if fd_result is not None else None
        tangents = call(
            c.name, "forward (blame probe)", launch_check.record_tangents, c.scenario, c.params, c.restore_all,
            recorder, direction=direction,
        )  # fmt: skip
        verdicts = launch_check.check_launches(recorder, list(c.params.values()), options, tangents=tangents)
        note = None
        if recorder.over_budget_at is not None:
            note = (
                f"copies of forward values over {launch_check.COPY_BUDGET_BYTES >> 20} MiB from launch "
                f"#{recorder.over_budget_at} on: later launches not checked"
            )
        return verdicts + recorded, note


class Reentrancy:
    """Backward run twice on one recorded forward (gradcheck.engine.reentrancy)."""

    name, field = "reentrancy", "replay"

    def run(self, c: ProbeContext):
        if not c.replay:
            return None
        if c.skipped_backward:
            return ReplayResult(skipped="backward was not launched (see dangling-adjoint)")
        if not c.loop.tape_backward_ran:
            return ReplayResult(
                skipped="the scenario's backward never runs backward on the tape of forward() (it records its own "
                "tapes, e.g. checkpointed segments), so rewrites on that tape cannot reach the gradient"
            )
        from gradcheck.engine.reentrancy import replay_twice

        try:
            return replay_twice(c)
        finally:
            c.restore_all()


PROBES = (CarriedState(), FiniteDifferences(), Blame(), Reentrancy())


def state_snapshot(scenario, params: dict) -> StateSnapshot:
    """Copies of every array the scenario holds (params and gradients aside), taken before the first pass.

    The pass-1 gradient is the derivative of the loss *from this state*. A forward may change state it does
    not rebuild: Warp's checkpointed fluid example copies each segment's end into the start arrays
    (``density_arrays[0]``), which its own backward puts back, so forward-only rollouts would each start from
    where the last one ended. Restoring this state before every rollout makes finite differences compare the
    function the tape differentiated. Over the budget nothing is copied and the FD result says so."""
    held = held_arrays(scenario, params)
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


def held_arrays(scenario, params: dict, names=None) -> dict:
    """id → array of every array the scenario holds, params and gradient buffers left out."""
    from gradcheck.tape.naming import walk

    names = names or walk(scenario)
    mine = {id(a) for a in params.values()} | {id(a.grad) for a in params.values() if a.grad is not None}
    return {
        id(a): a
        for a in names.arrays
        if id(a) not in mine and a.ptr and not (names.name(a) or "").endswith(".grad")  # gradients: other checks
    }
