"""One observer configuration, built from the check options by every driver (gradcheck.observe.config): what the
check judges and what the observer looks for agree, whoever drove the program."""

from __future__ import annotations

import sys

from conftest import TESTS

import gradcheck
from gradcheck.model.options import DEFAULT_CHECKS, CheckOptions
from gradcheck.observe.config import ObserverConfig, observer_config

STEEP = TESTS / "programs" / "observer_config"


def _steep():
    sys.path.insert(0, str(STEEP))
    try:
        import steep
    finally:
        sys.path.remove(str(STEEP))
    return steep


def test_the_config_takes_the_norm_the_checks_judge():
    assert observer_config(CheckOptions(max_norm=100.0)).max_norm == 100.0
    assert observer_config().max_norm == DEFAULT_CHECKS.max_norm
    assert observer_config(auto_iterations=False).auto_iterations is False


def test_the_config_is_frozen():
    import dataclasses

    import pytest

    with pytest.raises(dataclasses.FrozenInstanceError):
        ObserverConfig().max_norm = 1.0


def test_audit_looks_for_where_an_explosion_starts_at_its_own_max_norm():
    """A gradient of norm 1e3 under audit(max_norm=100): explosion, and the launch it started at (steep)."""
    steep = _steep()
    with gradcheck.audit(max_norm=100) as audit:
        steep.fit()
    (exploded,) = [f for f in audit.findings if f.check == "explosion" and f.severity.label == "error"]
    assert exploded.evidence.get("origin"), exploded.evidence
    assert exploded.evidence["origin"]["kernel"] == "steep"
    with gradcheck.audit() as quiet:  # the default 1e6: no explosion, nothing looked for
        steep.fit()
    assert not [f for f in quiet.findings if f.check == "explosion"]


def _outer(result) -> tuple:
    return result.passes, sorted((f.check, f.severity.label, f.subject, f.message) for f in result.findings)


def test_an_audit_inside_an_audit_has_its_own_findings_and_the_outer_is_unchanged():
    _steep()
    sys.path.insert(0, str(STEEP))
    try:
        import nested
    finally:
        sys.path.remove(str(STEEP))
    reports = {}
    for inside in (False, True):
        with gradcheck.audit() as outer:
            inner = nested.main(inside)
        reports[inside] = _outer(outer.result)
    assert [f.check for f in inner.findings if f.severity.label == "error"] == ["explosion"]
    assert inner.result.passes == 3
    assert reports[True] == reports[False] and reports[False][0] == 9


def test_an_audit_inside_a_program_under_exec_works_and_the_report_is_unchanged():
    from conftest import audited

    plain, with_inner = (audited(STEEP / "nested.py", *argv) for argv in ((), ("--nested",)))
    assert _outer(with_inner) == _outer(plain) and plain.passes == 9
