"""Baselines for `gradcheck ci`: findings a team has accepted (an upstream bias, a known issue), which then
no longer fail the run but are still reported, marked ``baselined``.

A finding is identified by (scenario label, check, subject): numbers in the message change from run to
run and platform to platform, the place does not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from gradcheck.model.errors import UsageError
from gradcheck.model.report import Report

SCHEMA = "gradcheck-baseline/1"


@dataclass(frozen=True)
class Baseline:
    accepted: frozenset[tuple[str, str, str]]  # (scenario label, check, subject)

    @classmethod
    def of(cls, report: Report) -> Baseline:
        """Every finding that fails ``report`` now (at or above its fail-on level)."""
        return cls(
            frozenset(
                (_label(result), f.check, f.subject)
                for result in report.scenarios
                for f in result.failing(report.fail_on)
            )
        )

    @classmethod
    def load(cls, path: Path) -> Baseline:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls(frozenset((a["scenario"], a["check"], a["subject"]) for a in data.get("accepted", [])))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise UsageError(
                f"--baseline {str(path)!r} is not a gradcheck baseline ({type(exc).__name__}: {exc}); "
                "write a new one with --update-baseline"
            ) from None

    def apply(self, report: Report) -> Report:
        """The report with every finding marked ``baselined`` True or False."""
        scenarios = tuple(
            replace(
                result,
                findings=tuple(
                    replace(f, baselined=(_label(result), f.check, f.subject) in self.accepted) for f in result.findings
                ),
            )
            for result in report.scenarios
        )
        return replace(report, scenarios=scenarios)

    def to_dict(self) -> dict:
        return {
            "schema": SCHEMA,
            "accepted": [{"scenario": s, "check": c, "subject": subject} for s, c, subject in sorted(self.accepted)],
        }


def _label(result) -> str:
    return result.label or result.name
