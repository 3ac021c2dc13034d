"""write-after-read: an array a launch read was rewritten, with different values, by a later launch.

Backward replays each launch from the arrays' current contents, so the earlier launch's adjoint
sees the later launch's values: the gradient mixes steps. Typical cause: scratch buffers shared by
every step of a rollout (stock Newton SolverFeatherstone's ``solver.J``/``P``/``H``/``L``). Rewrites
with identical values (forward kinematics recomputing the same ``body_q``) are harmless and only
listed in the evidence of the other findings.

A hazard needs the earlier launch to *read* the array's values (its code loads them): a launch that only
accumulates into an array (``wp.atomic_add(loss, 0, v)`` every frame into one loss, as Newton's diffsim examples
do) never needs them back, so a later rewrite cannot reach its gradient. Seen by the observer while the forward
records (gradcheck.observe.rewrites), under ``gradcheck run`` and ``gradcheck exec`` alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from gradcheck.model.evidence import Measure, Record
from gradcheck.model.findings import Finding, Severity
from gradcheck.model.paths import group_by_family
from gradcheck.model.trace import Rewrite, Trace

NAME = "write-after-read"
SUMMARY = "no array may be rewritten with different values after an earlier launch on the tape read it"

EXPLAIN = """
What it means: an array a launch read was rewritten with different values by a later launch. Backward replays
the earlier launch from the array's current contents, so its gradient uses the later values.

Evidence and severity (a warning): "read" means the earlier launch's code loads the array's values (read off the
kernel's source); a launch that only accumulates into an array (wp.atomic_add into a loss) or only stores into it
does not need them back, so a later rewrite cannot touch its gradient. Watched while the forward records, under
run (first pass) and exec alike; a forward captured into a CUDA graph (nothing runs while it records) is replayed
once from copies of its arrays, which are then put back bit for bit. A rewrite with the very values the reader
saw is harmless and only listed in the evidence.

Common causes: scratch buffers shared by every step of a rollout (stock Newton SolverFeatherstone's solver.J,
P, H, L, M); in-place updates of state arrays.

Fix: one buffer per step (cartpole: --set scratch=per-step swaps per-step matrices into the solver), or
recompute the values inside the kernel that reads them.

    for i in range(steps):
        for name, arr in scratch[i].items():
            setattr(solver, name, arr)           # this step's own M, J, P, H, L
        solver.step(states[i], states[i + 1], controls[i], None, dt)
"""


@dataclass(frozen=True, eq=False)
class WriteAfterReadEvidence(Record):
    """An array family (``arrays``) read by a launch and rewritten with other values by a later one ``rewrites``
    times (ranked by it), per (reader, writer) pair; the harmless same-value rewrites listed on the first finding."""

    arrays: tuple[str, ...]
    rewrites: int
    pairs: tuple[dict, ...]
    identical_rewrites: tuple[dict, ...]

    @property
    def subjects(self) -> tuple[str, ...]:
        return self.arrays

    @property
    def rank(self) -> Measure | None:
        return Measure.of(self.rewrites, "{} rewrites")


def check(trace: Trace, options=None) -> tuple[Finding, ...]:
    hazards, harmless = _merged(trace, "hazards"), _merged(trace, "identical")
    if not hazards:
        return ()
    identical = [
        {"arrays": fam, "count": sum(r.count for r in members), "writers": sorted({r.writer for r in members})}
        for fam, members in group_by_family(harmless, key=lambda r: r.array).items()
    ]
    findings = []
    for fam, rewrites in group_by_family(hazards, key=lambda r: r.array).items():
        count = sum(r.count for r in rewrites)
        arrays = sorted({r.array for r in rewrites})
        kernels = sorted(
            {f"{r.reader} → {r.writer}" for r in rewrites},
            key=lambda k: (-sum(r.count for r in rewrites if f"{r.reader} → {r.writer}" == k), k),
        )
        who = arrays[0] if len(arrays) == 1 else f"{fam} ({len(arrays)} arrays)"
        findings.append(
            Finding(
                check=NAME,
                severity=Severity.WARNING,
                subject=arrays[0] if len(arrays) == 1 else fam,
                message=(
                    f"{who} is read by a launch and rewritten with different values by a later one {count} times "
                    f"({', '.join(kernels[:3])}{' …' if len(kernels) > 3 else ''}): during backward the earlier "
                    "launch's adjoint sees the later values"
                ),
                hint=(
                    "give each step its own buffer (e.g. per-step solver scratch: --set scratch=per-step on cartpole), "
                    "or recompute the values inside the kernel that reads them"
                ),
                evidence=WriteAfterReadEvidence(
                    arrays=arrays,
                    rewrites=count,
                    pairs=[
                        {"reader": r.reader, "writer": r.writer, "count": r.count, "array": r.array} for r in rewrites
                    ],
                    # harmless rewrites (same values), listed once, on the first finding
                    identical_rewrites=identical if not findings else [],
                ),
            )
        )
    return tuple(findings)


def _merged(trace: Trace, kind: str) -> list[Rewrite]:
    """One Rewrite per (array, reader, writer) over every recording watched (the largest count seen)."""
    found: dict[tuple[str, str, str], Rewrite] = {}
    for record in trace.passes:
        for rewrite in getattr(record, kind):
            key = (rewrite.array, rewrite.reader, rewrite.writer)
            if key not in found or rewrite.count > found[key].count:
                found[key] = rewrite
    return list(found.values())
