"""JUnit XML, for CI systems that show test results: run, blame, exec, ci (one testsuite per scenario, one
testcase per check) and selftest (one testsuite, one testcase per variant).

A check with findings at or above --fail-on (not accepted by a baseline; suppressed ones are gone from
``findings``) is a <failure>; a check the driver gave no evidence to (under exec, the ones that re-run the
forward) or whose findings were all suppressed is <skipped>, never a pass; a scenario that crashed, hung or could not load is one testcase with an <error>;
a usage error is one testsuite with one <error>. Built with ElementTree; characters XML 1.0 forbids are dropped.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _clean(text) -> str:
    return _ILLEGAL.sub("", str(text))


def render(document, *, color: bool = False, width: int = 100, verbose: bool = False) -> str:
    """A Report (run, blame, exec), a CiDoc or a SelftestDoc as JUnit XML."""
    suites = ET.Element("testsuites", name="gradcheck")
    if document.KIND == "selftest":
        _selftest(suites, document)
    else:
        report = document.report if document.KIND == "ci" else document
        for result in report.scenarios:
            _scenario(suites, result, report)
        if report.error is not None:
            _error_suite(suites, "gradcheck", report.error)
    for key in ("tests", "failures", "errors"):  # the common schema has no "skipped" on <testsuites>
        suites.set(key, str(sum(int(s.get(key, "0")) for s in suites)))
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def _scenario(suites, result, report) -> None:
    label = _clean(result.label or result.name)
    if result.error is not None:
        _error_suite(suites, label, result.error)
        return
    suite = ET.SubElement(suites, "testsuite", name=label)
    bad = result.failing(report.fail_on)
    checks = report.checks or tuple(dict.fromkeys(f.check for f in result.findings))
    failures = skipped = 0
    for check in checks:
        case = ET.SubElement(suite, "testcase", classname=label, name=check)
        if check in report.not_judged and not any(f.check == check for f in result.findings + result.ignored):
            ET.SubElement(case, "skipped", message=_clean(report.not_judged[check]))  # no evidence: not a pass
            skipped += 1
            continue
        mine = [f for f in bad if f.check == check]
        silenced = [f for f in result.ignored if f.check == check]
        if silenced and not any(f.check == check for f in result.findings):  # judged by the user: not a pass
            why = "; ".join(dict.fromkeys(f.ignored_by or "ignored" for f in silenced))
            ET.SubElement(case, "skipped", message=_clean(f"{len(silenced)} finding(s) suppressed: {why}"))
            skipped += 1
        if mine:
            failure = ET.SubElement(case, "failure", message=_clean(f"{len(mine)} finding(s)"), type=check)
            failure.text = _clean(
                "\n".join(f"{f.severity.label} {f.subject}: {f.message} (fix: {f.hint})" for f in mine)
            )
            failures += 1
    _counts(suite, tests=len(checks), failures=failures, skipped=skipped)


def _selftest(suites, doc) -> None:
    if doc.error is not None:
        _error_suite(suites, "selftest", doc.error)
        return
    suite = ET.SubElement(suites, "testsuite", name="selftest")
    for row in doc.rows:
        case = ET.SubElement(suite, "testcase", classname="selftest", name=_clean(row.variant))
        if row.result == "skipped":
            ET.SubElement(case, "skipped", message=_clean(row.detail or "skipped"))
        elif row.result == "error":
            ET.SubElement(case, "error", message=_clean(row.detail), type="ScenarioError").text = _clean(row.detail)
        elif not row.passed:
            expected = ", ".join(row.expect) or "nothing"
            fired = ", ".join(row.fired) or "nothing"
            failure = ET.SubElement(case, "failure", message=row.result, type=row.result)
            failure.text = _clean(f"must fire: {expected}; fired: {fired}")
    counts = doc.counts()
    errors = sum(r.result == "error" for r in doc.rows)
    _counts(suite, tests=len(doc.rows), failures=counts["failed"] - errors, errors=errors, skipped=counts["skipped"])


def _error_suite(suites, label: str, message: str) -> None:
    suite = ET.SubElement(suites, "testsuite", name=label)
    case = ET.SubElement(suite, "testcase", classname=label, name="run")
    error = ET.SubElement(case, "error", message=_clean(message), type="ScenarioError")
    error.text = _clean(message)
    _counts(suite, tests=1, errors=1)


def _counts(suite, tests: int, failures: int = 0, errors: int = 0, skipped: int = 0) -> None:
    for key, value in (("tests", tests), ("failures", failures), ("errors", errors), ("skipped", skipped)):
        suite.set(key, str(value))
