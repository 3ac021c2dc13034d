"""Finding and Severity: the unit every check produces."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum

from gradcheck.model.evidence import Evidence, PlainEvidence, as_evidence


class Severity(IntEnum):
    INFO = 10
    WARNING = 20
    ERROR = 30

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls[text.upper()]
        except KeyError:
            names = ", ".join(s.label for s in cls)
            raise ValueError(f"unknown severity {text!r}; use one of {names}") from None


def checks_by_subject(findings) -> dict[str, list[str]]:
    """Subject → the checks whose findings name it (each finding's every subject, checks in the order found): what a
    parameter's verdict says, in a scenario's table and in a combined one."""
    flagged: dict[str, list[str]] = {}
    for finding in findings:
        for subject in finding.subjects:
            checks = flagged.setdefault(subject, [])
            if finding.check not in checks:
                checks.append(finding.check)
    return flagged


@dataclass(frozen=True)
class Finding:
    check: str
    severity: Severity
    subject: str  # exact path as the user's code spells it: "states[0].joint_q.grad"
    message: str  # what is wrong, in numbers
    hint: str  # the fix, in one line
    evidence: Evidence = field(default_factory=PlainEvidence)  # the check's typed evidence (model.evidence)
    baselined: bool | None = None  # gradcheck ci --baseline: accepted (True) or not (False); None without a baseline
    ignored_by: str | None = None  # the --ignore/--select rule that suppressed it (model.suppressions); None: reported

    def __post_init__(self):
        # frozen all the way down: a report cannot be edited after the checks ran (a mapping given by hand, as
        # tests and baselines do, becomes PlainEvidence, which covers, ranks and marks nothing)
        object.__setattr__(self, "evidence", as_evidence(self.evidence))

    @property
    def subjects(self) -> tuple[str, ...]:
        """Every subject this finding covers, its own first: a family reported once by its worst member names
        the others in its evidence."""
        return tuple(dict.fromkeys((self.subject, *self.evidence.subjects)))

    @property
    def covers(self) -> int:
        """How many subjects this one finding stands for: the family its evidence declares, else 1 (its subject
        may be the family's pattern, ``states[*].x``, which is not one of them)."""
        return max(len(self.evidence.subjects), 1)

    def __reduce__(self):
        # findings cross a process boundary under --timeout; the evidence pickles itself (model.evidence.Record)
        fields = (self.check, self.severity, self.subject, self.message, self.hint, self.evidence)
        return (Finding, (*fields, self.baselined, self.ignored_by))

    def to_dict(self) -> dict:
        return (
            {
                "check": self.check,
                "severity": self.severity.label,
                "subject": self.subject,
                "message": self.message,
                "hint": self.hint,
                "evidence": _plain(self.evidence.to_json()),
                "explain": f"gradcheck explain {self.check}",
            }
            | ({"baselined": self.baselined} if self.baselined is not None else {})
            | ({"ignored_by": self.ignored_by} if self.ignored_by is not None else {})
        )


def _plain(value):
    """Evidence as JSON-ready builtins (mapping proxies, tuples, numpy scalars); JSON has no NaN or Infinity,
    so a non-finite number becomes null (the message says what it was)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
