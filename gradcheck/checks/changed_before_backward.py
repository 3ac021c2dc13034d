"""changed-before-backward: an array a recorded launch read changed, outside the tape's launches, before
tape.backward.

Warp's tape keeps references to the arrays each launch was given, not their values: backward replays every
launch with whatever those arrays hold when it runs. An edit outside kernels after the launch that read it — still
inside the forward (a numpy write through a CPU view, ``assign``, ``fill_``, an unrecorded ``wp.copy``) or between
forward and backward (a param clamped or normalised, a start state refreshed) — makes backward differentiate a
function the forward never evaluated, with no error from Warp (NVIDIA/warp#1350: PyTorch's version counters would
have raised). The observer fingerprints each input right after the first launch that read it and again when its
backward starts (gradcheck.observe.input_watch): on the audited backwards of a program under ``gradcheck exec``,
on the first pass under ``gradcheck run`` (the default backward included).
"""

from __future__ import annotations

from dataclasses import dataclass

from gradcheck.model.evidence import ChangedArrays, Mark, Measure, Record
from gradcheck.model.findings import Finding, Severity
from gradcheck.model.paths import group_by_family
from gradcheck.model.trace import Trace

NAME = "changed-before-backward"
SUMMARY = "arrays a recorded launch read must not change before tape.backward replays it"

EXPLAIN = """
What it means: an array that a launch on the tape read changed, outside the tape's own launches, after that
launch ran and before tape.backward. Backward replays each launch with the values the arrays hold at that moment,
so the gradient is of a function the forward never evaluated. Warp raises nothing (NVIDIA/warp#1350 asks for
version counters). An array a later launch on the tape rewrites (through a view too) is write-after-read's, not
this check's; an array whose values no reader's adjoint uses (it enters additively, like an external force
refreshed every step) changes nothing backward computes, and is not reported (each reader's adjoint is run twice on
private copies, at the current values and at other ones).

Severity: an error, under run (the first pass) and exec (the audited backwards).

Common causes: params clamped, normalised or projected in place before backward; a numpy write through a CPU
view (arr.numpy()[i] = ...) or an assign/fill_/wp.copy into an input after the launch that read it, inside the
forward; state.assign(...) into a start state before backward; an input buffer refreshed for the next step before
the last one was differentiated.

Fix: change arrays only after backward (and after reading the gradients), or give the forward a copy.

    with tape:
        loss = forward(x)
    tape.backward(loss)          # first differentiate what the forward saw
    project_in_place(x)          # then change it
"""


@dataclass(frozen=True, eq=False)
class ChangedBeforeBackwardEvidence(Record):
    """Arrays (a family: ``arrays``) changed outside the tape's launches between the forward's read and backward:
    the launches backward replays with the new values (``readers``, tape positions ``reader_indices``), the first
    pass it happened on (also ``iteration``, exec's key until 0.1) and on how many (``count``, ``iterations``)."""

    arrays: tuple[str, ...]
    readers: tuple[str, ...]
    reader_count: int
    reader_indices: tuple[int, ...]
    first_pass: int
    site: str | None
    count: int
    iteration: int
    iterations: tuple[int, ...]

    @property
    def subjects(self) -> tuple[str, ...]:
        return self.arrays

    @property
    def rank(self) -> Measure | None:
        return Measure.of(self.count, "{} times")

    @property
    def marks(self) -> tuple[Mark, ...]:
        return (ChangedArrays(self.arrays, self.reader_indices),)


def check(trace: Trace, options=None) -> tuple[Finding, ...]:
    seen: dict[str, tuple] = {}  # subject → (first record, the change, how many iterations)
    passes: dict[str, list[int]] = {}
    for record in trace.passes:
        for change in record.changed:
            first, found, count = seen.get(change.subject, (record, change, 0))
            seen[change.subject] = (first, found, count + 1)
            passes.setdefault(change.subject, []).append(record.index)
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
                    f"{others}{first.subject} changed outside the tape's launches after {_reader(first)} read it and "
                    f"before backward {_at(trace, record)}; backward replays {readers} with the new values, so the "
                    f"gradient is of a function the forward never evaluated ({count} of "
                    f"{trace.iterations or len(trace.passes)} {trace.units})"
                ),
                hint=f"change {first.subject} only after tape.backward (and after reading gradients), or give the "
                "forward a copy of it",
                evidence=ChangedBeforeBackwardEvidence(
                    arrays=[c.subject for c in members],
                    readers=first.readers,
                    reader_count=first.reader_count,
                    reader_indices=[first.first_reader] if first.first_reader is not None else [],
                    first_pass=record.index,
                    site=record.site,
                    count=count,
                    iteration=record.index,
                    iterations=passes[first.subject][:50],
                ),
            )
        )
    return tuple(findings)


def _reader(change) -> str:
    """The first launch that read it ("launch #3 shift (train.py:40)"), or "the launch"."""
    return change.readers[0] if change.readers else "the launch"


def _at(trace: Trace, record) -> str:
    site = f" ({record.site})" if record.site else ""
    return f"#{record.index}{site}" if not trace.fixed_params else f"on pass {record.index}"
