"""reentrancy: a second backward on the same tape (gradients zeroed between) gives different gradients.

Backward re-runs forward code and rewrites forward outputs; when those outputs are shared with
other launches (see write-after-read), the second backward starts from different values than the
first. The finding names the arrays whose forward values backward changed.
"""

from __future__ import annotations

from dataclasses import dataclass

from gradcheck.model.evidence import Measure, Record
from gradcheck.model.findings import Finding, Severity
from gradcheck.model.paths import group_by_family
from gradcheck.model.trace import Trace

NAME = "reentrancy"
SUMMARY = "backward run twice on the same tape must give the same gradients"
# what exec cannot give it (JUnit lists it as skipped with this reason, never as a pass)
UNDER_EXEC = "needs gradcheck run: it replays a backward on the same tape, which only a scenario can offer"

EXPLAIN = """
What it means: running backward twice on the same tape (gradients zeroed between) gives different gradients:
backward overwrote forward values it depends on.

Common causes: the same as write-after-read: backward re-runs forward code and rewrites outputs that other
launches share.

Fix: run backward once per recorded forward; give shared scratch one copy per step.
"""


@dataclass(frozen=True, eq=False)
class ReentrancyEvidence(Record):
    """A second backward on the same tape changed the gradients by ``relative_difference`` (ranked by it): the
    arrays backward overwrote and the launches that did."""

    relative_difference: float
    changed_during_backward: tuple[str, ...]
    launches: object

    @property
    def rank(self) -> Measure | None:
        return Measure.of(self.relative_difference, "rel {:.3g}")


def check(trace: Trace, options=None) -> tuple[Finding, ...]:
    replay = trace.replay
    if replay is None or replay.skipped or not replay.reentrant:
        return ()
    families = group_by_family(replay.changed_during_backward, key=lambda n: n)
    labels = [members[0] if len(members) == 1 else f"{fam} ×{len(members)}" for fam, members in families.items()]
    shown = ", ".join(labels[:8]) + (" …" if len(labels) > 8 else "")
    return (
        Finding(
            check=NAME,
            severity=Severity.WARNING,
            subject=replay.worst_param or "gradients",
            message=(
                f"a second backward on the same tape changes this gradient by {replay.grad_diff:.3g} (relative); "
                f"backward overwrote the forward values of {len(replay.changed_during_backward)} arrays: {shown}"
            ),
            hint="run backward once per recorded forward, and give shared scratch buffers one copy per step",
            evidence=ReentrancyEvidence(
                relative_difference=replay.grad_diff,
                changed_during_backward=replay.changed_during_backward,
                launches=replay.launches,
            ),
        ),
    )
