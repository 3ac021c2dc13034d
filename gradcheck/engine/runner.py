"""``gradcheck run``'s driver: set a scenario up, run its passes under the observer, then the post-pass probes.

The pipeline of one scenario: setup() → snapshots of its params (and, for finite differences, of every array it
holds) → the passes (engine.pass_loop), which the one observer (gradcheck.observe) watches exactly as it watches
a program under ``gradcheck exec`` → the probes only a runner can run, since they run the forward again
(engine.post_pass) → one Trace for the checks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from gradcheck.engine.pass_loop import PassLoop, frozen_heap
from gradcheck.engine.post_pass import ProbeContext, run_probes, state_snapshot
from gradcheck.engine.scenario_hooks import CURRENT_PASS, PassFailed, params_of, setup
from gradcheck.measure.allocations import AllocationLedger
from gradcheck.measure.gradients import equality_tolerance
from gradcheck.model import dataflow
from gradcheck.model.errors import ScenarioError
from gradcheck.model.options import DEFAULT_CHECKS, BlameMode, CheckOptions, FDMode, FDOptions
from gradcheck.model.trace import Trace
from gradcheck.warp_compat import load_warp

Progress = Callable[[str, int, int], None]  # (scenario name, pass index, passes)

__all__ = ["PassFailed", "Progress", "run_passes"]


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
    checks: CheckOptions = DEFAULT_CHECKS,
) -> Trace:
    """Set up ``scenario`` and run ``passes`` passes. ``ledger``: an installed AllocationLedger to use
    (tests pass a quarantining one); by default one is installed around setup and the passes."""
    wp = load_warp()
    options = dict(options or {})
    own_ledger = ledger is None
    ledger = ledger or AllocationLedger().install()
    try:
        with wp.ScopedDevice(device):
            setup(scenario, name, device, fault, options)
            params = params_of(scenario, name)
            snapshots = {key: wp.clone(arr, requires_grad=False) for key, arr in params.items()}
            # the state the first pass starts from, for finite-difference rollouts to start from too
            state = state_snapshot(scenario, params) if fd is not None and fd.mode is not FDMode.off else None
            observer = _observer(scenario, device, ledger, params, snapshots, checks)
            loop = PassLoop(scenario, name, device, snapshots, observer, progress, clip_norm)
            head = {"scenario": name, "fault": fault, "device": device, "options": options, "clip_norm": clip_norm}
            _passes(loop, passes, observer, head)
            traced = observer.trace_fields()["params"]
            context = ProbeContext(
                scenario, name, device, params_of(scenario, name), snapshots, state, loop, observer.reader,
                {p.name: p.subject for p in traced}, observer.reader.tolerance, fd, blame, replay,
                gradients_moved=any(not q.equal_to_first for p in traced for q in p.passes if q.has_grad),
            )  # fmt: skip
            try:
                probes, errors = run_probes(context)
            except ScenarioError as exc:  # the scenario's forward failed during a probe: its passes still count
                raise PassFailed(str(exc), _trace(observer, head, scenario)) from exc
    finally:
        if own_ledger:
            ledger.uninstall()
    return _trace(observer, head, scenario, errors, **probes)


def _observer(scenario, device: str, ledger, params: dict, snapshots: dict, checks: CheckOptions):
    from gradcheck.observe import Observer
    from gradcheck.observe.config import observer_config

    config = observer_config(
        checks,
        device=device,
        auto_iterations=False,  # a pass is an iteration: the loop says where each starts and ends
        fixed_params=True,  # every pass starts from the same params: pass k's gradient must equal pass 1's
        tolerance=equality_tolerance(device),
        watch_inputs="first",  # every pass runs the same forward: what it reads is watched on the first
        keep_dataflow=dataflow.wanted(),  # --graph
    )
    observer = Observer(roots=lambda: scenario, ledger=ledger, config=config)
    observer.declare(params)
    for key, snapshot in snapshots.items():  # gradcheck's own allocations can receive a freed address too
        observer.names.give(snapshot, f"gradcheck's saved copy of {key}")
    return observer


def _passes(loop: PassLoop, passes: int, observer, head: dict) -> None:
    with frozen_heap() as settle, observer.installed():
        for index in range(1, passes + 1):
            token = CURRENT_PASS.set((index, passes))
            try:
                loop.run_pass(index, passes)
                settle()
            except ScenarioError as exc:
                observer.abandon_iteration()
                if not loop.records:
                    raise
                # the passes that finished are still checked and reported, beside the error
                raise PassFailed(str(exc), _trace(observer, head, loop.scenario)) from exc
            finally:
                CURRENT_PASS.reset(token)


def _trace(observer, head: dict, scenario, errors: tuple = (), **probes) -> Trace:
    from gradcheck.warp_compat import warp_version

    fields = observer.trace_fields()
    fields["internal_errors"] = fields["internal_errors"] + tuple(errors)
    dataflow.keep(head["scenario"], fields["dataflow"])
    return Trace(
        **head,
        zero_step="scenario.zero(tape)" if callable(getattr(scenario, "zero", None)) else "tape.zero()",
        warp_version=warp_version(),
        **fields,
        **probes,
    )
