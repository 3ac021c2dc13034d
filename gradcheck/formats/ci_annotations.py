"""Where CI shows findings inline: GitHub Actions workflow commands (``--format github``) and GitLab's Code Quality
report (``--format gitlab``), as ruff prints them.

- github: one ``::error``/``::warning``/``::notice`` line per finding, with ``file=``, ``line=`` (when known) and a
  ``title=`` naming the check and subject; the message and the fix as its text. Property values escape ``%``, CR,
  LF, ``:`` and ``,``; the text escapes ``%``, CR and LF (GitHub's workflow-command rules). A scenario or program that
  failed to run is an ``::error`` line of its own.
- gitlab: a JSON array of Code Quality issues (``description``, ``check_name``, ``fingerprint``, ``severity``,
  ``location.path``, ``location.lines.begin``), fingerprints unique within the report (GitLab shows one issue per
  fingerprint). A finding with no place in the repository is put at the scenario's or program's file, else at
  ``.``, line 1: GitLab requires a path.

Findings suppressed by ``--ignore``/``--select`` are left out of both: they are not the report's verdict.
"""

from __future__ import annotations

import json

from gradcheck.formats.code_places import Fingerprints, Locator, source_root

GITHUB_LEVELS = {"error": "error", "warning": "warning", "info": "notice"}
GITLAB_SEVERITIES = {"error": "critical", "warning": "major", "info": "info"}


def github(document, *, color: bool = False, width: int = 100, verbose: bool = False) -> str:
    report = document.report if document.KIND == "ci" else document
    locator = Locator(source_root(getattr(report, "source_root", None)))
    lines = []
    for scenario in report.scenarios:
        for finding in scenario.findings:
            place = locator.place(finding, scenario.spec)
            props = [f"file={_property(place.uri)}"] if place.uri else []
            props += [f"line={place.line}"] if place.uri and place.line else []
            props.append(f"title={_property(f'gradcheck {finding.check}: {finding.subject}')}")
            text = f"{finding.message}\nfix: {finding.hint}"
            lines.append(f"::{GITHUB_LEVELS[finding.severity.label]} {','.join(props)}::{_data(text)}")
        if scenario.error is not None:
            lines.append(f"::error title=gradcheck::{_data(f'{scenario.name}: {scenario.error}')}")
    if report.error is not None:
        lines.append(f"::error title=gradcheck::{_data(report.error)}")
    return "".join(line + "\n" for line in lines)


def gitlab(document, *, color: bool = False, width: int = 100, verbose: bool = False) -> str:
    report = document.report if document.KIND == "ci" else document
    locator, prints = Locator(source_root(getattr(report, "source_root", None))), Fingerprints()
    issues = []
    for scenario in report.scenarios:
        for finding in scenario.findings:
            place = locator.place(finding, scenario.spec)
            issues.append({
                "description": f"{finding.subject}: {finding.message} (fix: {finding.hint})",
                "check_name": finding.check,
                "fingerprint": prints.of(finding, place),
                "severity": GITLAB_SEVERITIES[finding.severity.label],
                "location": {"path": place.uri or ".", "lines": {"begin": place.line or 1}},
            })  # fmt: skip
    return json.dumps(issues, indent=2, allow_nan=False) + "\n"


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")
