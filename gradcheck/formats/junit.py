"""JUnit XML for `gradcheck ci`: one testsuite per scenario, one testcase per check.

A check with findings at or above --fail-on (not accepted by the baseline) is a <failure>; a
scenario that crashed, hung or could not load is one testcase with an <error>. Built with
ElementTree; characters XML 1.0 forbids are dropped.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _clean(text) -> str:
    return _ILLEGAL.sub("", str(text))


def render(report, checks) -> str:
    """``report``: a Report (its fail-on decides failures; baselined findings never fail); ``checks``: the
    check names, one testcase each per scenario."""
    suites = ET.Element("testsuites", name="gradcheck")
    total_tests = total_failures = total_errors = 0
    for result in report.scenarios:
        label = _clean(result.label or result.name)
        suite = ET.SubElement(suites, "testsuite", name=label)
        tests = failures = errors = 0
        if result.error is not None:
            case = ET.SubElement(suite, "testcase", classname=label, name="run")
            error = ET.SubElement(case, "error", message=_clean(result.error), type="ScenarioError")
            error.text = _clean(result.error)
            tests, errors = 1, 1
        else:
            bad = result.failing(report.fail_on)
            for check in checks:
                case = ET.SubElement(suite, "testcase", classname=label, name=check)
                mine = [f for f in bad if f.check == check]
                if mine:
                    failure = ET.SubElement(case, "failure", message=_clean(f"{len(mine)} finding(s)"), type=check)
                    failure.text = _clean(
                        "\n".join(f"{f.severity.label} {f.subject}: {f.message} (fix: {f.hint})" for f in mine)
                    )
                    failures += 1
                tests += 1
        suite.set("tests", str(tests))
        suite.set("failures", str(failures))
        suite.set("errors", str(errors))
        total_tests += tests
        total_failures += failures
        total_errors += errors
    suites.set("tests", str(total_tests))
    suites.set("failures", str(total_failures))
    suites.set("errors", str(total_errors))
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
