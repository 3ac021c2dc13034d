"""exec's default adjoint test against a Warp release's own autodiff bug (the compat lane runs this file on every
release it installs; here on the latest): the conditional expression whose branches read one element, wrong on
1.16.0 only, is an adjoint-mismatch error there, naming the kernel, its launch and the construct with the release
that fixed it, and silent on every other release."""

from __future__ import annotations

import pytest
from conftest import TESTS

from gradcheck.model import known_bugs
from gradcheck.model.findings import Severity

PROGRAM = str(TESTS / "programs" / "kernel_tests" / "ternary_training.py")
TERNARY_LINE = next(n for n, line in enumerate(open(PROGRAM).read().splitlines(), 1) if " if c[i] > 0.0 else " in line)


def test_the_ternary_bug_is_named_where_it_is_live_and_silent_elsewhere():
    import warp as wp

    from gradcheck.engine.program_audit import audit_program

    result, run = audit_program(PROGRAM, [])
    if run.status and "IfExp` not supported" in (run.error or ""):
        pytest.skip(f"Warp {wp.config.version} has no conditional expressions in kernels")
    assert run.status in (None, 0), run.error
    loud = [f for f in result.findings if f.severity >= Severity.WARNING]
    if known_bugs.TERNARY_SAME_ELEMENT.affects(wp.config.version):
        (finding,) = [f for f in loud if f.check == "adjoint-mismatch"]
        assert finding.severity == Severity.ERROR and "gain (ternary_training.py:" in finding.subject
        assert f"ternary_training.py:{TERNARY_LINE}" in finding.message and "1.17" in finding.message, finding.message
    else:
        assert loud == [], [f.message for f in loud]
        assert {row.kernel: row.statuses for row in result.blame.kernels}["gain"] == {"ok": 1}
