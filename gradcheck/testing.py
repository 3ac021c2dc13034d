"""pytest helper: fail a test when a scenario's gradients are unhealthy.

    from gradcheck.testing import assert_gradients_healthy

    def test_my_rollout_gradients():
        assert_gradients_healthy(MyRollout, checks=["accumulation", "fd-mismatch"], passes=3)

Or around code the test runs (the observer of ``gradcheck exec``, see gradcheck.auditing):

    def test_training_loop_gradients():
        with gradcheck.audit() as audit:
            train(steps=20)
        assert_audit_healthy(audit)

The assertion message lists every finding (severity, check, subject, message, fix), so the test
log says what is wrong and where, without re-running anything.
"""

from __future__ import annotations

from collections.abc import Iterable

from gradcheck.model.options import severity


def assert_gradients_healthy(scenario, checks: Iterable[str] | None = None, fail_on: str = "warning", **options):
    """Run ``gradcheck.check(scenario, **options)``; raise AssertionError listing the findings at or
    above ``fail_on`` (restricted to ``checks`` when given), or if the scenario failed to run.
    Returns the Report otherwise."""
    from gradcheck.api import check

    checks = _check_names(checks)
    threshold = severity(fail_on, "fail_on")
    report = check(scenario, **options)
    _raise_for(report.scenarios[0], checks, threshold)
    return report


def assert_audit_healthy(audit, checks: Iterable[str] | None = None, fail_on: str = "warning"):
    """After ``with gradcheck.audit() as audit:``, raise AssertionError listing its findings at or above
    ``fail_on`` (restricted to ``checks`` when given). Returns the Report otherwise."""
    checks = _check_names(checks)
    threshold = severity(fail_on, "fail_on")
    if audit.report is None:
        raise AssertionError("the audit has not ended: call assert_audit_healthy after the with block")
    _raise_for(audit.result, checks, threshold)
    return audit.report


def _check_names(checks):
    from gradcheck.checks import BY_NAME
    from gradcheck.model.errors import UsageError

    if checks is not None and not isinstance(checks, str):
        checks = tuple(checks)
    if isinstance(checks, str) or (checks is not None and not all(isinstance(c, str) for c in checks)):
        raise UsageError(f"checks must be a list of check names such as ['accumulation'], got {checks!r}")
    unknown = sorted(set(checks or ()) - set(BY_NAME))
    if unknown:
        import difflib

        close = difflib.get_close_matches(unknown[0], list(BY_NAME), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UsageError(f"unknown check(s) {', '.join(map(repr, unknown))}{hint} (checks: {', '.join(BY_NAME)})")
    return checks


def _raise_for(result, checks, threshold) -> None:
    if result.error:
        raise AssertionError(f"gradcheck could not run {result.name}: {result.error}")
    wanted = set(checks) if checks is not None else None
    bad = [f for f in result.findings if f.severity >= threshold and (wanted is None or f.check in wanted)]
    if bad:
        lines = [f"{len(bad)} gradient finding(s) in {result.name}:"]
        for f in bad:
            lines.append(f"  {f.severity.label} {f.check} {f.subject}: {f.message}")
            lines.append(f"    fix: {f.hint}")
        raise AssertionError("\n".join(lines))
