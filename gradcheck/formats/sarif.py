"""SARIF 2.1.0, for GitHub code scanning and every tool that reads it (``--format sarif``).

One run of the driver ``gradcheck``: a rule per registered check (its ``SUMMARY``, the first paragraph of its
``EXPLAIN`` and the whole of it as help, a pointer to docs/checks.md), a result per finding at its place in the
repository (formats.code_places: a URI relative to the source root through ``uriBaseId`` SRCROOT, the line when
known), its level from the severity (info is ``note``), ``partialFingerprints`` stable across runs, a baseline state
under ``gradcheck ci --baseline``, and a finding suppressed by ``--ignore``/``--select`` listed with an external
suppression naming the rule. A scenario or program that failed to run is a tool execution notification, and the
invocation is then unsuccessful.
"""

from __future__ import annotations

import json

from gradcheck.formats.code_places import Fingerprints, Locator, source_root

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
DOCS = "docs/checks.md"
LEVELS = {"error": "error", "warning": "warning", "info": "note"}


def render(document, *, color: bool = False, width: int = 100, verbose: bool = False) -> str:
    report = document.report if document.KIND == "ci" else document
    version = str(report.environment.get("gradcheck", "0"))
    root = source_root(getattr(report, "source_root", None))
    locator, prints = Locator(root), Fingerprints()
    rules, index = _rules(report)
    results, notifications = [], []
    for scenario in report.scenarios:
        for finding, ignored in [*((f, False) for f in scenario.findings), *((f, True) for f in scenario.ignored)]:
            results.append(_result(finding, ignored, scenario.spec, locator, prints, index))
        if scenario.error is not None:
            notifications.append(_notification(f"{scenario.name}: {scenario.error}"))
    if report.error is not None:
        notifications.append(_notification(report.error))
    run = {
        "tool": {"driver": {
            "name": "gradcheck", "version": version, "semanticVersion": version,
            "informationUri": "https://pypi.org/project/gradcheck/", "rules": rules,
        }},
        "originalUriBaseIds": {"SRCROOT": {"uri": root.as_uri() + "/"}},
        "invocations": [{"executionSuccessful": not notifications, "toolExecutionNotifications": notifications}],
        "results": results,
    }  # fmt: skip
    return json.dumps({"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}, indent=2, allow_nan=False) + "\n"


def _rules(report) -> tuple[list[dict], dict[str, int]]:
    """One rule per registered check (the report's ``checks``, described by its ``rule_texts``), and any other check
    a finding names (a report read back by ``combine`` has no texts: the rule is its id)."""
    found = [f.check for s in report.scenarios for f in (*s.findings, *s.ignored)]
    rules = []
    for name in dict.fromkeys((*report.checks, *found)):
        rule = {"id": name, "name": "".join(part.capitalize() for part in name.split("-"))}
        text = report.rule_texts.get(name)
        if text:
            explain = text["explain"].strip()
            rule |= {
                "shortDescription": {"text": text["summary"]},
                "fullDescription": {"text": " ".join(explain.split("\n\n", 1)[0].split())},
                "help": {"text": f"{explain}\n\nMore: gradcheck explain {name}; {DOCS}"},
            }
        rules.append(rule | {"properties": {"tags": ["gradient", "autodiff"]}})
    return rules, {rule["id"]: k for k, rule in enumerate(rules)}


def _result(finding, ignored: bool, spec: str, locator: Locator, prints: Fingerprints, index: dict) -> dict:
    place = locator.place(finding, spec)
    result = {
        "ruleId": finding.check,
        "level": LEVELS[finding.severity.label],
        "message": {"text": f"{finding.subject}: {finding.message}\nfix: {finding.hint}"},
        "partialFingerprints": {"gradcheck/v1": prints.of(finding, place)},
        "properties": {"subject": finding.subject, "severity": finding.severity.label},
    }
    if finding.check in index:
        result["ruleIndex"] = index[finding.check]
    if place.uri is not None:
        physical = {"artifactLocation": {"uri": place.uri, "uriBaseId": "SRCROOT"}}
        if place.line is not None:
            physical["region"] = {"startLine": place.line}
        result["locations"] = [{"physicalLocation": physical}]
    if finding.baselined is not None:
        result["baselineState"] = "unchanged" if finding.baselined else "new"
    if ignored:
        result["suppressions"] = [{"kind": "external", "justification": f"suppressed by {finding.ignored_by}"}]
    return result


def _notification(text: str) -> dict:
    return {"level": "error", "message": {"text": text}}
