"""dangling-adjoint: a pointer in a struct mirror or array-of-structs record that no live array owns.

An array of structs copies array descriptors into its records and keeps no reference to the
arrays: once a gradient buffer they point at is released, backward writes into freed memory (a
use-after-free), or, when the allocator has handed the address to a new array, silently into
that array. The runner checks before backward and does not launch backward on a pass where a
struct used by the tape holds such a pointer.
"""

from __future__ import annotations

from dataclasses import dataclass

from gradcheck.checks.pointer_issues import Sighting, pointer, seen_on, sightings
from gradcheck.model.evidence import Record
from gradcheck.model.findings import Finding, Severity
from gradcheck.model.known_bugs import STRUCT_GRAD_FREED
from gradcheck.model.trace import Trace

NAME = "dangling-adjoint"
SUMMARY = "no struct mirror or array-of-structs record may point at freed or foreign memory"

EXPLAIN = """
What it means: a pointer in a struct mirror or an array-of-structs record no longer belongs to the array it was
written for: the memory was freed, or handed to another array. gradcheck does not launch backward then.

Common causes: an array of structs built from struct instances that were dropped, after which requires_grad
was turned off (the records keep raw pointers and no reference); arrays kept alive only by a temporary. On Warp
before 1.7.2 a plain struct instance did the same: after requires_grad=False or a .grad replacement the old
gradient buffer was freed while the struct still pointed at it, and the next allocation of its size received
the address (NVIDIA/warp#720; the finding names the issue and the array that owns the memory now).

Fix: keep every array (and its .grad) referenced while an array of structs points at it, and rebuild the array
of structs after changing requires_grad or .grad.

    self.part_records = [make_part(a) for a in arrays]   # keep the instances
    self.parts = wp.array(self.part_records, dtype=Part)
"""

_REUSE = (
    "an address the allocator has already handed to a new array looks live, so a dangling pointer can hide behind "
    "reuse; gradcheck's allocation ledger catches that for memory allocated while it watched (setup and passes)"
)
_CONFIDENCE = {
    "freed": f"high: the allocation ledger saw this memory freed during the run ({_REUSE})",
    "reused": f"high: the memory was freed and now belongs to a newer array ({_REUSE})",
    "unknown": (
        "medium: no live Warp allocation covers this address; it may belong to an allocation made before gradcheck "
        f"started watching ({_REUSE})"
    ),
}


_HINTS = {
    "struct": (
        "re-assign the struct field (model.geo.scale = array) after changing its requires_grad or .grad, "
        "so the mirror holds the array's current gradient buffer"
    ),
    "array of structs": (
        "keep every array an array of structs points at (and its .grad) alive while it is used, and rebuild "
        "the array of structs after changing requires_grad or .grad"
    ),
}


@dataclass(frozen=True, eq=False)
class DanglingAdjointEvidence(Record):
    """A gradient pointer that points at freed memory: the pointer, its owner now, where it sits (``container``),
    the passes it was seen before and those whose backward was skipped for it; ``iteration``/``site``/
    ``iterations``/``count`` as exec said them until 0.1."""

    kind: str
    pointer: str
    owner: str | None
    in_tape: bool
    passes: tuple[int, ...]
    backward_skipped_passes: tuple[int, ...]
    confidence: str
    also_seen_at: tuple[str, ...]
    container: str
    upstream_bug: str | None
    iteration: int | None
    site: str | None
    iterations: tuple[int, ...]
    count: int


def check(trace: Trace, options=None) -> tuple[Finding, ...]:
    return tuple(_finding(trace, s) for s in sightings(trace, NAME))


def _finding(trace: Trace, s: Sighting) -> Finding:
    issue = s.first
    skipped = [r.index for r in trace.passes if r.backward_skipped]
    if s.in_tape and skipped:
        consequence = f"backward was not launched on pass(es) {_ranges(skipped)}, so nothing was written there"
    elif s.in_tape:
        consequence = "a kernel on the tape uses it"
    else:
        consequence = "no kernel on the tape uses this instance"
    owner = f" (now owned by {issue.owner})" if issue.owner else ""
    message = f"pointer {pointer(issue.mirror)}{owner}: {issue.detail}; {consequence}"
    upstream = issue.container == "struct" and STRUCT_GRAD_FREED.affects(trace.warp_version)
    if upstream:
        message += f"; {STRUCT_GRAD_FREED.note(trace.warp_version)}"
    return Finding(
        check=NAME,
        severity=Severity.ERROR,
        subject=issue.subject,
        message=message,
        hint=_HINTS[issue.container],
        evidence=DanglingAdjointEvidence(
            kind=issue.kind,
            pointer=pointer(issue.mirror),
            owner=issue.owner,
            in_tape=issue.in_tape,
            passes=s.passes,
            backward_skipped_passes=skipped if s.in_tape else [],
            confidence=_CONFIDENCE.get(issue.kind, _CONFIDENCE["unknown"]),
            also_seen_at=s.aliases,
            container=issue.container,
            upstream_bug=STRUCT_GRAD_FREED.issue if upstream else None,
            **seen_on(trace, s),
        ),
    )


def _ranges(indices: list[int]) -> str:
    if len(indices) > 2 and indices == list(range(indices[0], indices[-1] + 1)):
        return f"{indices[0]}–{indices[-1]}"
    return ", ".join(str(i) for i in indices)
