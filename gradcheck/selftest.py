"""`gradcheck selftest`: every built-in fault must be caught by its intended check, every clean
variant must stay silent, on this Warp version and device.

The expectations live here, next to nothing else: (scenario, fault, settings) → the checks that
must fire (an empty set: nothing may fire). Stock cartpole is not a clean variant: it carries
Newton's live scratch-sharing bias; its clean twin is ``scratch=per-step``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Case:
    scenario: str
    fault: str | None
    expect: frozenset  # checks that must fire; empty: no finding at all
    settings: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        extra = " ".join(f"{k}={v}" for k, v in self.settings.items())
        return (
            self.scenario + (f" --fault {self.fault}" if self.fault else " (clean)") + (f" [{extra}]" if extra else "")
        )


CASES = (
    Case("cartpole", None, frozenset(), {"scratch": "per-step"}),
    Case("cartpole", "no-zero", frozenset({"accumulation", "zero-audit"}), {"scratch": "per-step"}),
    Case("cartpole", "zero-before-backward", frozenset({"accumulation"}), {"scratch": "per-step"}),
    Case("cartpole", "state-in-tape", frozenset({"missing-gradient"}), {"scratch": "per-step"}),
    Case("cartpole", None, frozenset({"write-after-read", "reentrancy"}), {"scratch": "shared"}),
    Case("nested-struct", None, frozenset()),
    Case("nested-struct", "requires-grad-off", frozenset({"stale-adjoint"})),
    Case("nested-struct", "grad-replaced", frozenset({"stale-adjoint"})),
    Case("nested-struct", "late-requires-grad", frozenset({"stale-adjoint", "missing-gradient"})),
    Case("nested-struct", "aos-freed", frozenset({"dangling-adjoint"})),
    Case("nested-struct", "nested-copy", frozenset({"stale-adjoint"})),
    Case("spring-chain", None, frozenset()),
    Case("spring-chain", "nan-backward", frozenset({"nonfinite"})),
    Case("spring-chain", "optimizer-in-place", frozenset({"mutated-gradient"})),
    Case("spring-chain", "unit-mismatch", frozenset({"vanishing"})),
)


@dataclass(frozen=True)
class Outcome:
    case: Case
    fired: frozenset
    error: str | None

    @property
    def ok(self) -> bool:
        if self.error:
            return False
        if not self.case.expect:
            return not self.fired
        return self.case.expect <= self.fired


def run_selftest(device: str | None, passes: int = 3, progress=None) -> list[Outcome]:
    from gradcheck import pipeline
    from gradcheck.environment import check_device, default_device

    device = check_device(device) if device else default_device()
    outcomes = []
    for case in CASES:
        options = pipeline.RunOptions(device=device, passes=passes, fault=case.fault, settings=dict(case.settings))
        result = pipeline.run_one(case.scenario, options, device)
        outcomes.append(Outcome(case, frozenset(f.check for f in result.findings), result.error))
        if progress is not None:
            progress(case.label, len(outcomes), len(CASES))
    return outcomes
