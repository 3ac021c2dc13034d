"""Findings that share a check and a cause, grouped for the table: one row per cause, not per subject.

A zero step that misses sixteen buffers yields sixteen zero-audit findings with one fix between them;
printed one by one they push everything else off the screen and repeat the fix sixteen times. A group is
the findings of one check, at one severity, whose fixes are the same once the parts that only name the
subject are set aside. Two different fixes are two causes and stay two groups; so do two sites (line
numbers in a fix are not subject-specific, so they are not set aside).

Each member carries the number that makes one subject worse than another (a norm, a relative error, a
count), from the finding's evidence where its check puts it there, else from its message, so a group lists
its subjects worst first. Pure Python: the table renders these, the JSON never groups.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from gradcheck.model.findings import Finding, Severity
from gradcheck.model.paths import family

MAX_SHOWN = 4  # subjects a group names before "+N more"
_SUBJECT = "\x00subject"  # stands for the finding's own subject in a normalised fix
_INDEX = re.compile(r"\[\d+\]")
_NORM_IN_MESSAGE = re.compile(r"\bnorm (-?\d+(?:\.\d+)?(?:e[-+]?\d+)?)")


@dataclass(frozen=True)
class Measure:
    """The number that ranks a subject within its group: ``value`` (the larger, the worse: a measure where
    smaller is worse stores its negation) and ``text``, the number as the row says it."""

    value: float
    text: str


@dataclass(frozen=True)
class Member:
    finding: Finding
    measure: Measure | None

    @property
    def label(self) -> str:
        """The subject; a finding that stands for a family of arrays says so (``states[*].body_f.grad ×100``)."""
        count = covered(self.finding)
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


def covered(finding: Finding) -> int:
    """How many arrays one finding stands for (a family reported once, its worst member named)."""
    return finding.covers


def measure(finding: Finding) -> Measure | None:
    """The finding's ranking number: its check's own from the evidence, else the first norm its message
    names, else none (its order in the report stands)."""
    reader = _MEASURES.get(finding.check)
    found = reader(finding.evidence) if reader else None
    if found is not None:
        return found
    match = _NORM_IN_MESSAGE.search(finding.message)
    if match:
        return _number(float(match.group(1)), "norm {:.3g}")
    return None


def _number(value, template: str, smaller_is_worse: bool = False) -> Measure | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return Measure(-value if smaller_is_worse else float(value), template.format(value))


def _largest(values, key: str | None = None) -> float | None:
    """The largest finite number of a list (of numbers, or of mappings read at ``key``)."""
    if not isinstance(values, (list, tuple)):
        return None
    numbers = [v.get(key) if key and isinstance(v, Mapping) else v for v in values]
    finite = [n for n in numbers if isinstance(n, (int, float)) and not isinstance(n, bool) and math.isfinite(n)]
    return max(finite) if finite else None


def _fd_error(evidence: Mapping) -> float | None:
    candidates = [evidence.get("max_direction_error"), _largest(evidence.get("elements"), "rel_error")]
    return _largest([c for c in candidates if c is not None])


def _nonfinite(evidence: Mapping) -> Measure | None:
    nan, inf = evidence.get("nan"), evidence.get("inf")
    if not (isinstance(nan, (list, tuple)) and isinstance(inf, (list, tuple)) and nan and inf):
        return None
    return _number(nan[-1] + inf[-1], "{} non-finite")


_MEASURES: dict[str, Callable[[Mapping], Measure | None]] = {
    "accumulation": lambda e: _number(e.get("ratio_last_first"), "last/1 ×{:.3g}"),
    "zero-audit": lambda e: _number(_largest(e.get("norms_after_zero")), "norm {:.3g}"),
    "stale-adjoint": lambda e: _number(_largest(e.get("orphan_norms_after_zero")), "norm {:.3g}"),
    "write-after-read": lambda e: _number(e.get("rewrites"), "{} rewrites"),
    "reentrancy": lambda e: _number(e.get("relative_difference"), "rel {:.3g}"),
    "fd-mismatch": lambda e: _number(_fd_error(e), "rel {:.3g}"),
    "adjoint-mismatch": lambda e: _number(_largest(e.get("launches"), "rel_error"), "rel {:.3g}"),
    "explosion": lambda e: _number(e.get("peak"), "norm {:.3g}") or _number(e.get("ratio"), "×{:.3g}"),
    "vanishing": lambda e: _number(e.get("sensitivity"), "sensitivity {:.2g}", smaller_is_worse=True),
    "nonfinite": _nonfinite,
    "mutated-gradient": lambda e: _number(e.get("produced_norm"), "norm {:.3g}"),
    "changed-before-backward": lambda e: _number(e.get("count"), "{} times"),
}
