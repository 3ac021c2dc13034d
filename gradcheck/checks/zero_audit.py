"""zero-audit: after the scenario's zero step, every gradient the tape can reach must be zero.

``tape.zero()`` clears only ``tape.gradients``, which backward fills from kernel arguments. A
buffer it misses (reached through an array of structs, zeroed by hand for the params only,
``tape.zero()`` called before backward) keeps its values, and the next backward that touches it
adds to them. Each survivor is named by path; indexed families (one per state) are grouped.

The zero step is whatever the program does: ``tape.zero()``/``reset()``, a scenario's ``zero(tape)``, or, for a
program that starts a new iteration without either (a fresh tape, gradients zeroed by hand), nothing: its
buffers are then audited when the next iteration's backward starts, on what the last backward left in them.
"""

from __future__ import annotations

from dataclasses import dataclass

from gradcheck.model.evidence import Measure, Record, largest
from gradcheck.model.findings import Finding, Severity
from gradcheck.model.known_bugs import GRADS_SEEDS_NOT_ZEROED, NESTED_STRUCT_NOT_ZEROED, KnownBug
from gradcheck.model.paths import group_by_family
from gradcheck.model.trace import Survivor, Trace

NAME = "zero-audit"
SUMMARY = "after the zero step, no gradient buffer reachable from the tape may be nonzero"

EXPLAIN = """
What it means: after your zero step a gradient buffer the tape can reach still holds values; the next backward
that touches it adds to them.

Evidence and severity: the zero step is whatever the program does (tape.zero() or reset(), a scenario's
zero(tape)), audited once it is over; a program that starts a new iteration without one (a fresh tape each step,
gradients zeroed by hand) is audited when the next iteration's backward starts, on the buffers still holding
exactly what the last backward left. A survivor is a warning; an info when every later backward left it
bit-identical (a seed it refills: nothing accumulated). When a survivor feeds a param's gradient, accumulation
reports the consequence as an error.

Common causes: zeroing only the params by hand; tape.zero() called on a fresh tape; gradients behind an array of
structs (wp.array(dtype=MyStruct)), which tape.zero() cannot follow; buffers registered with record_func.
On older Warp, tape.zero() itself skipped arrays seeded with tape.backward(grads=...) (before 1.6.0,
NVIDIA/warp#407) and arrays inside nested structs (before 1.8.1, NVIDIA/warp#807); the finding names the
issue when the running version has it.

Fix: call tape.zero() after reading gradients, and zero what it cannot reach yourself.

    tape.zero()
    for part in part_arrays:        # reached only through records of an array of structs
        part.grad.zero_()
"""


@dataclass(frozen=True, eq=False)
class ZeroAuditEvidence(Record):
    """Gradients still nonzero after the zero step (``zero_step``): the worst survivor's norms after each zero step
    (ranked by the largest), how the tape reached it, every survivor of the family (``survivors``);
    ``iteration``/``site``/``iterations``/``count``: the passes after which it survived (exec's keys until 0.1)."""

    zero_step: str
    first_pass: int
    norms_after_zero: tuple[float, ...]
    reached_via: str
    aliases: tuple[str, ...]
    survivors: tuple[str, ...]
    survivor_count: int
    seeded: tuple[str, ...]
    upstream_bug: str | None
    iteration: int
    site: str | None
    iterations: tuple[int, ...]
    count: int
    refilled_by_backward: bool | None = None  # every later backward left it as it was: an info
    OPTIONAL = frozenset({"refilled_by_backward"})

    @property
    def subjects(self) -> tuple[str, ...]:
        return self.survivors

    @property
    def rank(self) -> Measure | None:
        return Measure.of(largest(self.norms_after_zero), "norm {:.3g}")


def check(trace: Trace, options=None) -> tuple[Finding, ...]:
    first_seen: dict[str, int] = {}
    steps: dict[str, str] = {}
    latest: dict[str, Survivor] = {}
    history: dict[str, list[float]] = {}
    for position, record in enumerate(trace.passes):
        for s in record.survivors:
            first_seen.setdefault(s.subject, record.index)
            steps.setdefault(s.subject, _zero_step(trace, record, position))
            latest[s.subject] = s
            history.setdefault(s.subject, [0.0] * position).append(s.norm)
    findings = []
    for fam, members in group_by_family(latest.values(), key=lambda s: s.subject).items():
        worst = max(members, key=lambda s: s.norm)
        step = steps[worst.subject]
        finding = _finding(trace, fam, members, worst, first_seen[worst.subject], history[worst.subject], step)
        findings.append(_harmless(finding) if _refilled(trace, members, first_seen) else finding)
    return tuple(findings)


def _zero_step(trace: Trace, record, position: int) -> str:
    """What the program did to clear the gradients after this record's backward."""
    if record.zero_step:
        return record.zero_step
    following = trace.passes[position + 1].index if position + 1 < len(trace.passes) else record.index + 1
    return f"{trace.unit} #{record.index}, with no zero step before {trace.unit} #{following}"


def _refilled(trace: Trace, members: list[Survivor], first_seen: dict[str, int]) -> bool:
    """Every later backward left these leftovers bit-identical: it refills them with the same values (a seed the
    scenario's backward writes with fill_ or copy) or never touches them, so nothing accumulated in them here."""
    later = [r for r in trace.passes if r.index > min(first_seen[s.subject] for s in members)]
    return bool(later) and all(s.subject in r.kept_by_backward for r in later for s in members)


def _harmless(finding: Finding) -> Finding:
    from dataclasses import replace

    message = finding.message.replace(
        "the next backward that touches it adds to it",
        "every later backward left it exactly as it was (it refills it, or never writes it), so nothing "
        "accumulated in this program",
    )
    return replace(
        finding,
        severity=Severity.INFO,
        message=message,
        hint="harmless as this program runs; zero it too if another backward could add to it",
        evidence=finding.evidence.extended(refilled_by_backward=True),
    )


def _finding(
    trace: Trace, fam: str, members: list[Survivor], worst: Survivor, first: int, norms: list[float], step: str
) -> Finding:
    others = f"{len(members)} arrays {fam}, worst shown: " if len(members) > 1 else ""
    seen = [r.index for r in trace.passes if any(s.subject == worst.subject for s in r.survivors)]
    via = worst.reached_via + (", seeded with tape.backward(grads=...)" if worst.seeded else "")
    message = (
        f"{others}nonzero after {step} from {trace.unit} {first} on: norm {worst.norm:.4g}, "
        f"{worst.nonzero} of {worst.size} values (reached via {via}); "
        + (
            "a backward seeded through grads= overwrites it, any other backward that reaches it adds to it"
            if worst.seeded
            else "the next backward that touches it adds to it"
        )
    )
    bug = upstream_bug(trace, worst)
    if bug is not None:
        message += f"; {bug.note(trace.warp_version)}"
    return Finding(
        check=NAME,
        severity=Severity.WARNING,
        subject=worst.subject,
        message=message,
        hint=_hint(step, worst),
        evidence=ZeroAuditEvidence(
            zero_step=step,
            first_pass=first,
            norms_after_zero=norms,
            reached_via=worst.reached_via,
            aliases=worst.aliases,
            survivors=[s.subject for s in members],
            survivor_count=len(members),
            seeded=[s.subject for s in members if s.seeded],
            upstream_bug=bug.issue if bug else None,
            iteration=first,
            site=next((r.site for r in trace.passes if r.index == first), None),
            iterations=seen[:50],
            count=len(seen),
        ),
    )


def upstream_bug(trace: Trace, survivor: Survivor) -> KnownBug | None:
    """The released Warp bug that explains this survivor on the Warp version that ran, if any."""
    if survivor.seeded and GRADS_SEEDS_NOT_ZEROED.affects(trace.warp_version):
        return GRADS_SEEDS_NOT_ZEROED
    if survivor.reached_via == "nested struct field" and NESTED_STRUCT_NOT_ZEROED.affects(trace.warp_version):
        return NESTED_STRUCT_NOT_ZEROED
    return None


def _hint(step: str, survivor: Survivor) -> str:
    if survivor.seeded:
        return (
            f"clear the gradients of the arrays you seed with tape.backward(grads=...) too: "
            f"{survivor.subject}.zero_() after tape.zero()"
        )
    if survivor.reached_via == "array of structs":
        return (
            "tape.zero() does not follow the records of an array of structs: zero these gradients yourself "
            f"({(survivor.aliases or (survivor.subject,))[0]}.zero_()) after reading them"
        )
    if step.startswith("tape.zero()"):
        return f"tape.zero() misses this buffer: call {survivor.subject}.zero_() after reading gradients"
    return "the zero step misses this buffer: call tape.zero() on the tape that ran backward, after reading gradients"
