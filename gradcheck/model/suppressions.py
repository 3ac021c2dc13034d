"""Suppressions: ``--select`` / ``--ignore CHECK[:SUBJECT-GLOB]`` and the same keys in ``[tool.gradcheck]``.

A user who has judged a finding (an upstream bias they accept, a parameter they freeze on purpose) needs to
silence it without switching the check off for everything else, as every linter lets them. A suppressed finding
is never dropped: it moves from the scenario's ``findings`` to its ``ignored`` (so it no longer decides the exit
code), is counted in the summary and listed in JSON with the rule that silenced it.

Rules: ``CHECK`` matches every finding of that check; ``CHECK:GLOB`` only those whose subject matches GLOB, where
``*`` is any run of characters and ``?`` one character, and everything else is literal (subjects are full of
``[5]``, which shell-style globs would read as character classes). A finding that stands for a family of arrays
(``controls[*].joint_f.grad ×100``) matches a rule naming any member of the family. ``--select`` keeps only the findings some
select rule matches; ``--ignore`` removes those an ignore rule matches. On the command line ``--select`` replaces
the config's ``select`` (as ruff's does) and ``--ignore`` adds to its ``ignore``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from gradcheck.model.errors import UsageError
from gradcheck.model.paths import family


@dataclass(frozen=True)
class Rule:
    check: str
    subject: str | None  # the glob, None for every subject
    origin: str  # where the rule was written: "--ignore", "pyproject.toml [tool.gradcheck] ignore"

    @property
    def text(self) -> str:
        return self.check + (f":{self.subject}" if self.subject is not None else "")

    def matches(self, finding) -> bool:
        """The check, and the subject glob on the finding's subject; a finding that stands for a family of arrays
        (``controls[*].joint_f.grad ×100``, reported once by its worst member) on any member of the family."""
        if finding.check != self.check:
            return False
        if self.subject is None:
            return True
        glob = _glob(self.subject)
        if any(glob.fullmatch(subject) for subject in finding.subjects):  # its own, then the others it covers
            return True
        if finding.covers == 1:
            return False
        return _glob(family(self.subject)).fullmatch(family(finding.subject)) is not None


@dataclass(frozen=True)
class Suppressions:
    select: tuple[Rule, ...] = ()
    ignore: tuple[Rule, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.select or self.ignore)

    def reason(self, finding) -> str | None:
        """Why ``finding`` is suppressed ("--ignore nonfinite:model.*"), or None when it is reported."""
        if self.select and not any(rule.matches(finding) for rule in self.select):
            return "not selected by " + ", ".join(dict.fromkeys(rule.origin for rule in self.select))
        for rule in self.ignore:
            if rule.matches(finding):
                return f"{rule.origin} {rule.text}"
        return None

    def apply(self, report):
        """``report`` with every suppressed finding moved from its scenario's ``findings`` to ``ignored``."""
        if not self:
            return report
        scenarios = []
        for result in report.scenarios:
            kept, ignored = [], list(result.ignored)
            for finding in result.findings:
                why = self.reason(finding)
                if why is None:
                    kept.append(finding)
                else:
                    ignored.append(replace(finding, ignored_by=why))
            scenarios.append(replace(result, findings=tuple(kept), ignored=tuple(ignored)))
        return replace(report, scenarios=tuple(scenarios))

    def merged(self, select: Iterable[str], ignore: Iterable[str], checks: Iterable[str]) -> Suppressions:
        """These (from the config) with the command line's: its --select replaces, its --ignore adds."""
        chosen = parse_rules(select, "--select", checks)
        return Suppressions(chosen or self.select, self.ignore + parse_rules(ignore, "--ignore", checks))


def parse_rules(values: Iterable[str], origin: str, checks: Iterable[str]) -> tuple[Rule, ...]:
    """Rules from ``CHECK[:GLOB]`` texts (each may hold several, comma-separated). An unknown check is a usage
    error naming the known ones: a typo must not silently suppress nothing."""
    known = tuple(checks)
    rules = []
    for value in values:
        if not isinstance(value, str):
            raise UsageError(f"{origin}: {value!r} is not a CHECK[:SUBJECT-GLOB] string")
        for text in (part.strip() for part in value.split(",")):
            if not text:
                continue
            check, colon, subject = text.partition(":")
            if check not in known:
                raise UsageError(f"{origin} {text!r}: unknown check {check!r}; checks: {', '.join(known)}")
            if colon and not subject:
                raise UsageError(f"{origin} {text!r}: give a subject glob after ':' (e.g. {check}:model.*) or none")
            rules.append(Rule(check, subject if colon else None, origin))
    return tuple(rules)


def _glob(pattern: str) -> re.Pattern:
    parts = (".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile("".join(parts), re.DOTALL)
