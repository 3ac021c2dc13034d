"""Shared grouping for the two struct-pointer checks: one finding per subject across passes.

The same stale pointer is seen on every pass; a struct reachable both as a kernel argument
(``model``) and as the user's own instance it was copied from (``geo``) shows the same pointer
twice. Findings group by subject, and a not-on-the-tape sighting of a pointer already reported
on the tape is folded into that finding as an alias.
"""

from __future__ import annotations

from dataclasses import dataclass

from gradcheck.model.trace import PointerIssue, Trace


@dataclass
class Sighting:
    first: PointerIssue
    passes: list[int]
    orphan_norms: list[float | None]
    aliases: list[str]

    @property
    def in_tape(self) -> bool:
        return self.first.in_tape


def sightings(trace: Trace, check: str) -> list[Sighting]:
    by_subject: dict[str, Sighting] = {}
    for record in trace.passes:
        for issue in record.pointer_issues:
            if issue.check != check:
                continue
            seen = by_subject.get(issue.subject)
            if seen is None:
                seen = by_subject[issue.subject] = Sighting(issue, [], [], [])
            seen.passes.append(record.index)
            seen.orphan_norms.append(issue.orphan_norm)
    ordered = sorted(by_subject.values(), key=lambda s: not s.in_tape)
    kept: list[Sighting] = []
    for s in ordered:
        twin = next(
            (k for k in kept if k.in_tape and not s.in_tape and k.first.mirror == s.first.mirror and s.first.mirror),
            None,
        )
        if twin is not None:
            twin.aliases.append(s.first.subject)
        else:
            kept.append(s)
    return kept


def seen_on(trace: Trace, s: Sighting) -> dict:
    """The passes a pointer issue was seen before (``iteration`` the first, its ``site``; exec's keys until 0.1)."""
    first = s.passes[0] if s.passes else None
    site = next((r.site for r in trace.passes if r.index == first), None)
    return {"iteration": first, "site": site, "iterations": s.passes[:50], "count": len(s.passes)}


def pointer(value: int) -> str:
    return f"0x{value:x}" if value else "null"
