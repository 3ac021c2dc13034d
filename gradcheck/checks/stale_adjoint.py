"""stale-adjoint: a struct mirror whose pointer disagrees with the live array it was assigned from.

Kernels see a struct's ctypes mirror, which Warp fills when a field is assigned and never
refreshes. After ``arr.requires_grad = False`` the gradient flows into the old buffer (an orphan
``tape.zero()`` never clears; its norm grows pass after pass); after ``arr.grad = new`` the new
buffer stays zero; after a late ``requires_grad = True`` the mirror's grad is null and the
gradient is lost; a nested struct edited after it was assigned into its parent leaves the parent
on the old array (nested structs are copied on assignment).
"""

from __future__ import annotations

from dataclasses import dataclass

from gradcheck.checks.pointer_issues import Sighting, pointer, seen_on, sightings
from gradcheck.model.evidence import Measure, Record, largest
from gradcheck.model.findings import Finding, Severity
from gradcheck.model.trace import Trace

NAME = "stale-adjoint"
SUMMARY = "struct mirrors and array-of-structs records must point at the arrays (and grads) the fields hold now"

EXPLAIN = """
What it means: a wp.struct's ctypes mirror (what kernels receive) points at another data or grad buffer than
the field's live array.

Common causes: arr.requires_grad = False, arr.grad = new, or requires_grad = True after the array was assigned to
the struct (the mirror is a copy made at assignment); a nested struct edited after it was assigned into its parent
(nested structs are copied).

Severity: an error when a kernel on the tape uses the struct, except where the claim is that backward writes into
the old gradient buffer and that buffer, measured after every zero step, never received anything (Warp builds
the adjoint of a component store from the live .grad; Warp's own test_composite_component_adjoint relies on it):
then an info saying just that. A struct no kernel on the tape uses: a warning.

Fix: assign the field again after changing it, and the inner struct again after editing it.

    model.geo.scale.requires_grad = False
    model.geo.scale = model.geo.scale      # refresh the mirror
    geo.thickness = new_thickness
    model.geo = geo                        # the parent holds a copy: assign it again
"""

_WHAT = {
    "orphan-grad": "gradient goes into a hidden orphan buffer",
    "replaced-grad": "gradient goes into the old buffer; the new .grad stays zero",
    "null-grad": "gradient is lost (mirror grad is null)",
    "stale-data": "the kernel reads a different array than the field holds",
    "nested-copy": "the parent struct still uses the old array",
}


# kinds whose message says backward writes into the old buffer: an error only once the buffer shows it (or where
# it was not measured); a buffer measured zero after every zero step never received anything
_WRITES_OLD = ("orphan-grad", "replaced-grad")


@dataclass(frozen=True, eq=False)
class StaleAdjointEvidence(Record):
    """A struct's mirror of a gradient that is not the live array's: both pointers, the buffer backward writes and
    its norm after each zero step (ranked by the largest); ``iteration``/``site``/``iterations``/``count``: the
    passes it was seen before (exec's keys until 0.1)."""

    kind: str
    mirror_ptr: str
    live_ptr: str
    in_tape: bool
    passes: tuple[int, ...]
    owner: str | None
    orphan_norms_after_zero: tuple[float, ...]
    also_seen_at: tuple[str, ...]
    iteration: int | None
    site: str | None
    iterations: tuple[int, ...]
    count: int
    copied_from: str | None = None
    OPTIONAL = frozenset({"copied_from"})

    @property
    def rank(self) -> Measure | None:
        return Measure.of(largest(self.orphan_norms_after_zero), "norm {:.3g}")


def check(trace: Trace, options=None) -> tuple[Finding, ...]:
    return tuple(_finding(trace, s) for s in sightings(trace, NAME))


def _finding(trace: Trace, s: Sighting) -> Finding:
    issue = s.first
    where = "a kernel on the tape uses this struct" if s.in_tape else "no kernel on the tape uses this instance"
    message = (
        f"{_WHAT.get(issue.kind, issue.kind)}: mirror {pointer(issue.mirror)} vs live {pointer(issue.live)}; "
        f"{issue.detail}; {where}"
    )
    norms = [n for n in s.orphan_norms if n is not None]
    if norms:
        growth = ", ".join(f"{n:.4g}" for n in norms)
        message += f"; the buffer backward writes ({issue.owner}) after each zero step: {growth}"
    evidence = StaleAdjointEvidence(
        kind=issue.kind,
        mirror_ptr=pointer(issue.mirror),
        live_ptr=pointer(issue.live),
        in_tape=issue.in_tape,
        passes=s.passes,
        owner=issue.owner,
        orphan_norms_after_zero=norms,
        also_seen_at=s.aliases,
        copied_from=issue.source or None,
        **seen_on(trace, s),
    )
    unproven = issue.kind in _WRITES_OLD and bool(norms) and not any(norms)
    if unproven:  # what is known, no more: the mirror is stale, and backward has not used the old buffer
        message = (
            f"the struct's mirror still holds the old gradient buffer ({pointer(issue.mirror)}; the field's .grad is "
            f"{pointer(issue.live)}), but backward has written nothing into it after {len(norms)} zero step(s): the "
            "adjoints that ran read the field's live .grad (Warp builds a component store's adjoint from it); a "
            "kernel that reads the gradient through the mirror itself would miss the new one"
        )
    return Finding(
        check=NAME,
        severity=Severity.INFO if unproven else Severity.ERROR if s.in_tape else Severity.WARNING,
        subject=issue.subject,
        message=message,
        hint=_hint(issue),
        evidence=evidence,
    )


def _hint(issue) -> str:
    field = issue.subject.removesuffix(".grad")
    parent, _, leaf = field.rpartition(".")
    if issue.kind == "nested-copy":
        return f"assign the inner struct again after editing it ({parent} = {issue.source}); nested structs are copied"
    if issue.kind == "null-grad":
        return f"set requires_grad before assigning, or re-assign the field ({field} = <array>) after turning it on"
    return f"re-assign the field ({field} = <array>) after changing requires_grad or .grad, so the mirror is refreshed"
