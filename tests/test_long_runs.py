"""Cost must not grow with training length: what the observer keeps is bounded in the number of backwards, it keeps
no array of the program alive, and what happens late in a long run is still reported."""

from __future__ import annotations

import pytest
from conftest import TESTS

LOOP = str(TESTS / "programs" / "exec" / "churning_batches.py")


@pytest.mark.slow  # a long program by design (~11 s)
def test_a_long_run_with_new_leaves_every_step_is_bounded_and_reports_a_late_nan(capsys):
    from gradcheck.engine.program_audit import ProgramAudit, audit_program
    from gradcheck.observe.log import HISTORY, KEEP_FIRST, KEEP_NOTABLE
    from gradcheck.observe.params import MAX_LEAVES

    kept = {}
    original = ProgramAudit.trace

    def trace(self):
        found = original(self)
        kept["trace"] = found
        return found

    ProgramAudit.trace = trace
    try:
        result, run = audit_program(LOOP, ["--iterations", "400", "--nan-at", "390"])
    finally:
        ProgramAudit.trace = original
    assert run.status in (None, 0)
    assert "first batch freed: True" in capsys.readouterr().out  # gradcheck kept none of them alive
    t = kept["trace"]
    assert t.backwards == t.iterations == 400
    assert len(t.passes) <= KEEP_FIRST + KEEP_NOTABLE
    assert len(t.params) <= 1 + MAX_LEAVES  # x, and the batches up to the bound
    assert all(len(p.history) <= HISTORY + 1 for p in t.params)
    (nan,) = [f for f in result.findings if f.check == "nonfinite" and f.severity.label == "error"]
    assert nan.subject == "x.grad" and nan.evidence["first_pass"] == 390  # the late NaN, at its backward
    # x, and at most the one batch whose own gradient went NaN with it (shown once, not once per batch)
    assert [p.role for p in result.params][:1] == ["updated"] and len(result.params) <= 2
