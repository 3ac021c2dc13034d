"""changed-before-backward: an array a recorded launch read changed between forward() and tape.backward.

Warp's tape keeps references to the arrays each launch was given, not their values: backward replays every
launch with whatever those arrays hold when it runs. An in-place edit between forward and backward (a param
clamped or normalised, a numpy write through a CPU view, ``assign`` of a new start state, a buffer refreshed
for the next step) makes backward differentiate a function the forward never evaluated, with no error from
Warp (NVIDIA/warp#1350: PyTorch's version counters would have raised). The observer fingerprints what each
recording read when it ends and again when its backward starts (gradcheck.probes.input_watch): on every backward
of a program under ``gradcheck exec``; under ``gradcheck run`` on the first pass of scenarios with their own
``backward(tape, loss)``, since the default backward runs right after forward() and no program code runs between.
"""

from __future__ import annotations

from gradcheck.model.findings import Finding, Severity
from gradcheck.model.paths import group_by_family
from gradcheck.model.trace import Trace

NAME = "changed-before-backward"
SUMMARY = "arrays a recorded launch read must not change before tape.backward replays it"

EXPLAIN = """
What it means: an array that a launch on the tape read changed after forward() returned and before
tape.backward ran. Backward replays each launch with the values the arrays hold at that moment, so the gradient
is of a function the forward never evaluated. Warp raises nothing (NVIDIA/warp#1350 asks for version counters).

Severity: an error, under run (first pass, for scenarios with their own backward) and exec (every backward).

Common causes: params clamped, normalised or projected in place before backward; a numpy write through a CPU
view (arr.numpy()[i] = ...); state.assign(...) or wp.copy into a start state before backward; an input buffer
refreshed for the next step before the last one was differentiated.

Fix: change arrays only after backward (and after reading the gradients), or give the forward a copy.

    with tape:
        loss = forward(x)
    tape.backward(loss)          # first differentiate what the forward saw
    project_in_place(x)          # then change it
"""


def check(trace: Trace, options=None) -> tuple[Finding, ...]:
    seen: dict[str, tuple] = {}  # subject → (first record, the change, how many iterations)
    for record in trace.passes:
        for change in record.changed:
            first, found, count = seen.get(change.subject, (record, change, 0))
            seen[change.subject] = (first, found, count + 1)
    findings = []
    for family, entries in group_by_family(list(seen.values()), key=lambda e: e[1].subject).items():
        record, first, count = entries[0]
        members = [e[1] for e in entries]
        others = f"{len(members)} arrays {family}, first: " if len(members) > 1 else ""
        more = first.reader_count - len(first.readers)
        readers = ", ".join(first.readers) + (f" and {more} more" if more > 0 else "")
        findings.append(
            Finding(
                check=NAME,
                severity=Severity.ERROR,
                subject=first.subject,
                message=(
                    f"{others}{first.subject} changed after the forward recorded it and before backward "
                    f"{_at(trace, record)}; backward replays {readers} with the new values, so the gradient is of a "
                    f"function the forward never evaluated ({count} of {trace.iterations or len(trace.passes)} "
                    f"{trace.units})"
                ),
                hint=f"change {first.subject} only after tape.backward (and after reading gradients), or give the "
                "forward a copy of it",
                evidence={
                    "arrays": [c.subject for c in members],
                    "readers": list(first.readers),
                    "reader_count": first.reader_count,
                    "first_pass": record.index,
                    "site": record.site,
                    "count": count,
                },
            )
        )
    return tuple(findings)


def _at(trace: Trace, record) -> str:
    site = f" ({record.site})" if record.site else ""
    return f"#{record.index}{site}" if not trace.fixed_params else f"on pass {record.index}"
