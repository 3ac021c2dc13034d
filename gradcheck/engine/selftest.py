"""`gradcheck selftest`: the faults of cartpole, nested-struct, rollout and spring-chain must each be caught by its
intended check, every clean variant must stay silent, on this Warp version and device. (The lights, tiles and
chains faults are proven by their own tests, not here.)

The expectations live here, next to nothing else: (scenario, fault, settings) → the checks that
must fire (an empty set: nothing may fire). Stock cartpole is not a clean variant: it carries
Newton's live scratch-sharing bias; its clean twin is ``scratch=per-step``. Faults that reproduce a
historical Warp bug (gradcheck.model.known_bugs) expect a finding only on the versions that have the bug.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Case:
    scenario: str
    fault: str | None
    expect: frozenset  # checks that must fire; empty: no finding at all
    settings: dict = field(default_factory=dict)
    min_warp: str | None = None  # the first Warp that can build the fault's kernels

    @property
    def label(self) -> str:
        extra = " ".join(f"{k}={v}" for k, v in self.settings.items())
        return (
            self.scenario + (f" --fault {self.fault}" if self.fault else " (clean)") + (f" [{extra}]" if extra else "")
        )


NEWTON = ("cartpole", "double-pendulum")


def cases(warp_version: str) -> tuple[Case, ...]:
    """The matrix for this Warp version. Faults that reproduce a historical Warp bug expect their
    finding only where the bug exists; on a fixed version the same usage must be silent."""
    from gradcheck.model.known_bugs import (
        COPY_ADJOINT_ASSIGNS,
        FUNC_ADJOINTS_FOLLOW_MODULE,
        GRADS_SEEDS_NOT_ZEROED,
        NESTED_STRUCT_NOT_ZEROED,
        STRUCT_GRAD_FREED,
        TERNARY_SAME_ELEMENT,
    )

    def wrong_on(bug) -> frozenset:
        """A fault built on an upstream bug: the gradient is wrong, and the launch named, only where it lives."""
        return frozenset({"fd-mismatch", "adjoint-mismatch"}) if bug.affects(warp_version) else frozenset()

    leaks = frozenset({"accumulation", "zero-audit"})
    # a gradient buffer the struct mirror still points at is freed before 1.7.2 (warp#720), kept alive after
    old_grad = frozenset({"dangling-adjoint"} if STRUCT_GRAD_FREED.affects(warp_version) else {"stale-adjoint"})
    return (
        Case("cartpole", None, frozenset(), {"scratch": "per-step"}),
        Case("cartpole", "no-zero", leaks, {"scratch": "per-step"}),
        Case("cartpole", "zero-before-backward", frozenset({"accumulation"}), {"scratch": "per-step"}),
        Case("cartpole", "state-in-tape", frozenset({"missing-gradient"}), {"scratch": "per-step"}),
        Case("cartpole", None, frozenset({"write-after-read", "reentrancy"}), {"scratch": "shared"}),
        Case("nested-struct", None, frozenset()),
        Case("nested-struct", "requires-grad-off", old_grad),
        Case("nested-struct", "grad-replaced", old_grad),
        Case("nested-struct", "late-requires-grad", frozenset({"stale-adjoint", "missing-gradient"})),
        Case("nested-struct", "aos-freed", frozenset({"dangling-adjoint"})),
        Case("nested-struct", "nested-copy", frozenset({"stale-adjoint"})),
        Case(
            "nested-struct", "tape-zero-only", leaks if NESTED_STRUCT_NOT_ZEROED.affects(warp_version) else frozenset()
        ),
        Case("rollout", None, frozenset()),
        Case("rollout", "per-output-backward", leaks if GRADS_SEEDS_NOT_ZEROED.affects(warp_version) else frozenset()),
        Case("spring-chain", None, frozenset()),
        Case("spring-chain", "nan-backward", frozenset({"nonfinite"})),
        Case("spring-chain", "optimizer-in-place", frozenset({"mutated-gradient"})),
        Case("spring-chain", "unit-mismatch", frozenset({"vanishing"})),
        Case("spring-chain", "loss-not-cleared", frozenset({"stateful-forward"})),
        Case("spring-chain", "clock-not-reset", frozenset({"stateful-forward"})),
        Case("spring-chain", "changed-before-backward", frozenset({"changed-before-backward"})),
        Case("spring-chain", "wrong-func-grad", frozenset({"fd-mismatch", "adjoint-mismatch"})),
        Case("spring-chain", "runtime-loop", frozenset({"fd-mismatch", "adjoint-mismatch"})),
        Case("spring-chain", "record-func-assigns", frozenset({"fd-mismatch", "adjoint-mismatch"})),
        Case("spring-chain", "clone-on-tape", wrong_on(COPY_ADJOINT_ASSIGNS)),
        Case("spring-chain", "ternary-same-element", wrong_on(TERNARY_SAME_ELEMENT), min_warp="1.8.0"),
        Case("spring-chain", "backward-opt-in", wrong_on(FUNC_ADJOINTS_FOLLOW_MODULE)),
    )


@dataclass(frozen=True)
class Outcome:
    case: Case
    fired: frozenset
    error: str | None
    skipped: str | None = None  # why the case could not run here (Newton on an old Warp)

    @property
    def ok(self) -> bool:
        if self.skipped:
            return True
        if self.error:
            return False
        if not self.case.expect:
            return not self.fired
        return self.case.expect <= self.fired


def run_selftest(device: str | None, passes: int = 3, progress=None) -> list[Outcome]:
    """Every case in order. Ctrl-C raises Interrupted to the caller: the cases that ran are no verdict on the
    matrix, and a KeyboardInterrupt must not become one case's "error"."""
    from gradcheck.engine.environment import check_device, default_device
    from gradcheck.engine.interrupts import watch
    from gradcheck.engine.scenario_run import run_one
    from gradcheck.model.known_bugs import version_tuple
    from gradcheck.model.options import RunOptions
    from gradcheck.warp_compat import load_warp

    device = check_device(device) if device else default_device()
    version = load_warp().__version__
    matrix = cases(version)
    newton = _newton_missing()
    outcomes = []
    with watch():
        for case in matrix:
            if case.scenario in NEWTON and newton:
                outcomes.append(Outcome(case, frozenset(), None, skipped=newton))
            elif case.min_warp and version_tuple(version) < version_tuple(case.min_warp):
                outcomes.append(Outcome(case, frozenset(), None, skipped=f"needs Warp >= {case.min_warp}"))
            else:
                options = RunOptions(device=device, passes=passes, fault=case.fault, settings=case.settings)
                result = run_one(case.scenario, options, device)
                outcomes.append(Outcome(case, frozenset(f.check for f in result.findings), result.error))
            if progress is not None:
                progress(case.label, len(outcomes), len(matrix))
    return outcomes


def _newton_missing() -> str | None:
    """Why the Newton cases are skipped here, or None when they run."""
    from gradcheck.scenarios._featherstone import NEWTON_NEEDS_WARP, newton_missing

    why = newton_missing()
    return None if why is None else f"skipped: Newton needs warp-lang >= {NEWTON_NEEDS_WARP}; {why}"
