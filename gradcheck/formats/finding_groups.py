"""Findings that share a check and a cause, grouped for the table: one row per cause, not per subject.

A zero step that misses sixteen buffers yields sixteen zero-audit findings with one fix between them;
printed one by one they push everything else off the screen and repeat the fix sixteen times. A group is
the findings of one check, at one severity, whose fixes are the same once the parts that only name the
subject are set aside. Two different fixes are two causes and stay two groups; so do two sites (line
numbers in a fix are not subject-specific, so they are not set aside).

Each member carries the number that makes one subject worse than another (a norm, a relative error, a
count), as its evidence declares it (``rank``, model.evidence: no check's name or key is known here), so a group
lists its subjects worst first. Pure Python: the table renders these, the JSON never groups.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from gradcheck.model.evidence import Measure
from gradcheck.model.findings import Finding, Severity
from gradcheck.model.paths import family

MAX_SHOWN = 4  # subjects a group names before "+N more"
_SUBJECT = "\x00subject"  # stands for the finding's own subject in a normalised fix
_INDEX = re.compile(r"\[\d+\]")


@dataclass(frozen=True)
class Member:
    finding: Finding
    measure: Measure | None

    @property
    def label(self) -> str:
        """The subject; a finding that stands for a family of arrays says so (``states[*].body_f.grad ×100``)."""
        count = self.finding.covers
        subject = self.finding.subject
        return f"{family(subject)} ×{count}" if count > 1 else subject

    def compact(self) -> str:
        return f"{self.label} ({self.measure.text})" if self.measure else self.label


@dataclass(frozen=True)
class FindingGroup:
    check: str
    severity: Severity
    members: tuple[Member, ...]  # worst first

    @property
    def findings(self) -> tuple[Finding, ...]:
        return tuple(m.finding for m in self.members)

    @property
    def worst(self) -> Finding:
        return self.members[0].finding

    def shown(self, limit: int = MAX_SHOWN) -> tuple[tuple[Member, ...], int]:
        """The members a row names and how many it leaves to ``+N more``; naming one more costs no more
        than saying ``+1 more``, so a group one over the limit is named in full."""
        if len(self.members) <= limit + 1:
            return self.members, 0
        return self.members[:limit], len(self.members) - limit

    @property
    def fix(self) -> str:
        """The fix, said once: the shared hint, or the worst's when the hints differ only in the subject
        they name (each member's own fix is the same sentence about its own subject)."""
        hints = {f.hint for f in self.findings}
        if len(hints) == 1:
            return self.worst.hint
        return f"{self.worst.hint}; the same for the others"


def group_findings(findings: Iterable[Finding]) -> list[FindingGroup]:
    """Findings grouped by check and cause, the groups in the order their first finding came, members
    worst first (findings without a number keep their order, after those with one)."""
    groups: dict[tuple, list[Finding]] = {}
    for finding in findings:
        groups.setdefault(cause_key(finding), []).append(finding)
    out = []
    for members in groups.values():
        measured = [Member(f, measure(f)) for f in members]
        ranked = sorted(measured, key=lambda m: -m.measure.value if m.measure else math.inf)
        out.append(FindingGroup(members[0].check, members[0].severity, tuple(ranked)))
    return out


def cause_key(finding: Finding) -> tuple[str, Severity, str]:
    """Same check, same severity, same fix once the subject's own name and list indices are set aside."""
    return finding.check, finding.severity, normalised_hint(finding)


def normalised_hint(finding: Finding) -> str:
    """The hint with the subject (and the array it is the gradient of) replaced by a placeholder and list
    indices by ``[*]``: "call states[3].body_f.grad.zero_()" and "call states[7].body_f.grad.zero_()" are
    one fix. Other numbers stay: a line number or a threshold in a fix is part of what to do."""
    hint = finding.hint
    subject = finding.subject
    for name in dict.fromkeys((subject, subject.removesuffix(".grad"))):
        if not name:
            continue
        # the subject itself is replaced wherever it stands; the bare identifier of its gradient ("x" of "x.grad")
        # only where it is used as the array ("x.requires_grad"), never as a token of the fix's prose or code
        # ("torch.sqrt(x)"), which every finding of the cause shares
        after = r"(?![\w\[])" if name == subject or "." in name or "[" in name else r"(?=\.)"
        hint = re.sub(rf"(?<![\w.\[]){re.escape(name)}{after}", _SUBJECT, hint)
    return _INDEX.sub("[*]", hint)


def measure(finding: Finding) -> Measure | None:
    """The finding's ranking number, as its evidence declares it (model.evidence); none: its order stands."""
    return finding.evidence.rank
