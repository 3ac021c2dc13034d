"""Accumulation without an optimizer: a Jacobian taken row by row on one computation, read after each row, with no
zero between the rows (gradcheck.observe.row_reads), is an accumulation error naming the read; its clean twins (a
zero between rows by tape.zero() or x.grad.zero_(), one read after deliberate accumulation, rows taken as
differences of the running sum) stay silent, and the same mistake as a scenario gets the same verdict under run.

The programs are tests/programs/jacobian (one kernel module for all of them); the default audit cadence, no
--audit-every.
"""

from __future__ import annotations

import pytest
from conftest import TESTS, audited

from gradcheck.model.findings import Finding, Severity
from gradcheck.model.trace import CarriedRead, PassRecord, Trace

CORPUS = TESTS / "programs" / "jacobian"


def _line_of(name: str, text: str) -> int:
    lines = (CORPUS / name).read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def _exec(name: str):
    result = audited(CORPUS / name)
    assert not [f for f in result.findings if "jacobian rows" in f.message], "the row watch itself failed"
    return result


def _accumulation(result) -> list[Finding]:
    return [f for f in result.findings if f.check == "accumulation"]


def test_rows_read_without_a_zero_between_them_are_an_accumulation_error():
    (finding,) = _accumulation(_exec("rows_fault.py"))
    line = _line_of("rows_fault.py", "rows.append(x.grad.numpy().copy())")
    assert (finding.severity, finding.subject) == (Severity.ERROR, "x.grad")
    assert finding.evidence["site"].endswith(f"rows_fault.py:{line}")
    assert f"host read (rows_fault.py:{line}) after backward #2" in finding.message
    assert finding.evidence["backwards"] == [[1, 2], [2, 3]]  # rows 2 and 3 each carried the rows before them
    assert "tape.zero()" in finding.hint and "x.grad.zero_()" in finding.hint


def test_a_kernel_that_loads_the_row_is_the_read_named():
    (finding,) = _accumulation(_exec("rows_kernel_read.py"))
    line = _line_of("rows_kernel_read.py", "wp.launch(store_row")
    assert (finding.severity, finding.subject) == (Severity.ERROR, "x.grad")
    assert finding.evidence["reader"] == f"launch store_row (rows_kernel_read.py:{line})"


@pytest.mark.parametrize(
    "program",
    [
        "rows_zeroed.py",  # tape.zero() after each row
        "rows_grad_zeroed.py",  # x.grad.zero_() after each row: no hook sees it, the values do
        "rows_summed.py",  # three backwards, one read at the end: deliberate accumulation
        "rows_differenced.py",  # the running sum read on purpose, rows as g - prev
        "rows_differenced_elsewhere.py",  # the sums returned by one function, differenced in another
        "rows_two_quantities.py",  # each backward's gradient read at a place of its own: the sum is meant
    ],
)
def test_the_clean_twins_stay_silent(program):
    assert _accumulation(_exec(program)) == []


def test_the_scenario_gets_the_scripts_verdict_under_run():
    import gradcheck

    def verdicts(fault):
        report = gradcheck.check(str(CORPUS / "rows_scenario.py"), passes=2, fault=fault, fd="off", replay=False)
        (result,) = report.scenarios
        assert result.error is None, result.error
        return {(f.check, f.severity.label, f.subject) for f in result.findings if f.check == "accumulation"}

    script = {(f.check, f.severity.label, f.subject) for f in _accumulation(_exec("rows_fault.py"))}
    assert verdicts("no-zero-between-rows") == script == {("accumulation", "error", "x.grad")}
    assert verdicts(None) == set()


# -- the reading code and the check, without Warp ------------------------------------------------------------------
def test_differences_of_consecutive_reads_are_read_off_the_source():
    from gradcheck.observe.differencing import reads_take_differences

    differenced = CORPUS / "rows_differenced.py"
    line = _line_of("rows_differenced.py", "g = x.grad.numpy().copy()")
    assert reads_take_differences(f"{differenced}:{line}") is True
    fault = CORPUS / "rows_fault.py"
    assert reads_take_differences(f"{fault}:{_line_of('rows_fault.py', 'x.grad.numpy()')}") is False
    assert reads_take_differences("<stdin>:3") is None  # no source: no verdict
    assert reads_take_differences(f"{CORPUS / 'no_such_program.py'}:3") is None


def test_a_row_compared_with_an_expected_one_is_no_difference(tmp_path):
    """Subtracting the read from something that is not another read of it (a test's expected row) leaves the rows
    wrong: still an error."""
    from gradcheck.observe.differencing import reads_take_differences

    program = tmp_path / "compare.py"
    program.write_text(
        "def rows(tape, x, y, seeds, expected):\n"
        "    errors = []\n"
        "    for seed, want in zip(seeds, expected):\n"
        "        tape.backward(grads={y: seed})\n"
        "        row = x.grad.numpy()\n"
        "        errors.append(abs(row - want).max())\n"
        "    return errors\n"
    )
    assert reads_take_differences(f"{program}:5") is False
    program.write_text(
        program.read_text().replace("row - want", "row - prev").replace("    return", "        prev = row\n    return")
    )
    assert reads_take_differences(f"{program}:5") is True


def _trace(differenced) -> Trace:
    read = CarriedRead("x.grad", "host read (rows.py:9)", "/p/rows.py:9", "host read (rows.py:9)", 1, 2,
                       "seeded on another output", 2.0, 4.47, differenced)  # fmt: skip
    record = PassRecord(index=2, loss=None, launches=1, audited_buffers=1, survivors=(), carried_reads=(read,))
    return Trace(scenario="rows.py", fault=None, device="cpu", passes=(record,), fixed_params=False, backwards=2)


def test_the_check_says_no_verdict_when_the_source_could_not_be_read():
    from gradcheck.checks import accumulation

    (error,) = accumulation.check(_trace(False))
    assert error.severity == Severity.ERROR and error.evidence["site"] == "/p/rows.py:9"
    (info,) = accumulation.check(_trace(None))
    assert info.severity == Severity.INFO and "no verdict" in info.message
    assert accumulation.check(_trace(True)) == ()
