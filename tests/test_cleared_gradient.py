"""A gradient cleared between the backward that produced it and the update that consumes it (issue 39, item 5).

The zero step moved ahead of the optimizer step leaves the update reading zeros: the params never move and the
program runs on as if it trained. The corpus is tests/programs/cleared: cleared_model.py (a two-param fit, one SGD
launch per param), train.py (a training loop, ``--variant``) and as_scenario.py (the same as a scenario, the variant a
fault). Each variant must get the same (check, severity, subject) from ``gradcheck run`` and ``gradcheck exec``: the
mistake (tape.zero() before the update; both gradients zeroed by hand before it) a ``mutated-gradient`` error on each
param's gradient, its clean twins (the zero step after the update, one param frozen by zeroing its gradient, an
in-place clip before the update, a projection that zeroes every value, an update from the program's own copies)
nothing, and all of them zeroed by hand for the first updates only (a freeze the program may mean) an info. In the slow lane, Newton's drone
example with its ``tape.zero()`` moved ahead of ``optimizer.step`` (the issue's own case).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import TESTS, audited, exec_json

CORPUS = TESTS / "programs" / "cleared"
SCENARIO, SCRIPT, MODEL = (str(CORPUS / name) for name in ("as_scenario.py", "train.py", "cleared_model.py"))
ERRORS = {("mutated-gradient", "error", "p.w.grad"), ("mutated-gradient", "error", "p.b.grad")}
EXPECTED = {
    "clean": set(),
    "zero-before-update": ERRORS,
    "zeroed-by-hand": ERRORS,
    "freeze-bias": set(),  # b frozen on purpose; w trains
    # every gradient zeroed by hand before the first two updates only: a freeze the program may mean, no verdict
    "warm-up-freeze": {("mutated-gradient", "info", "p.w.grad"), ("mutated-gradient", "info", "p.b.grad")},
    "clip-before-update": set(),  # the program prepares what its update consumes
    "projected-to-zero": set(),  # its own launch zeroed them: a projection at a box's corner, not a zero step
    "own-gradient": set(),  # cleared, but the update reads the program's own copies
}


def _line(text: str) -> int:
    return next(i for i, line in enumerate(open(MODEL), 1) if text in line)


def _run(variant: str):
    import gradcheck

    report = gradcheck.check(SCENARIO, passes=3, fault=None if variant == "clean" else variant, fd="off", replay=False)
    (result,) = report.scenarios
    assert result.error is None, result.error
    return result


def _exec(variant: str):
    result = audited(SCRIPT, "--variant", variant)
    assert result.passes == 4
    return result


def _verdicts(result) -> set[tuple[str, str, str]]:
    return {(f.check, f.severity.label, f.subject) for f in result.findings}


@pytest.mark.parametrize("variant", list(EXPECTED))
def test_run_and_exec_judge_a_cleared_gradient_alike(variant):
    ran, executed = _verdicts(_run(variant)), _verdicts(_exec(variant))
    assert ran == executed, f"run: {sorted(ran)}\nexec: {sorted(executed)}"
    assert ran == EXPECTED[variant]


def test_the_error_names_the_zero_step_the_update_and_the_fix():
    result = _exec("zero-before-update")
    finding = next(f for f in result.findings if f.subject == "p.w.grad")
    zero_line, update_line = _line("zero()  # the mistake"), _line("wp.launch(sgd, dim=N, inputs=[p, p.grad, LR])")
    assert f"tape.zero() at cleared_model.py:{zero_line}" in finding.message
    assert f"launch sgd (cleared_model.py:{update_line}) read all zeros" in finding.message
    assert re.search(r"backward #1 \(train\.py:\d+\) produced norm 71\.66", finding.message)
    assert "(4 of 4 backwards)" in finding.message  # every iteration: the fit never moved
    assert "zero the gradients after the update" in finding.hint
    evidence = finding.evidence
    assert evidence["kind"] == "cleared-before-update" and evidence["iterations"] == [1, 2, 3, 4]
    assert evidence["clearer"] == f"tape.zero() at cleared_model.py:{zero_line}"
    assert evidence["produced_norm"] == pytest.approx(71.66, rel=1e-3)


def test_a_clearing_gradcheck_does_not_see_is_said_as_such():
    """x.grad.zero_() runs no hook: the finding says what it could be, and only because no update read a gradient."""
    (finding, *_) = [f for f in _run("zeroed-by-hand").findings if f.subject == "p.w.grad"]
    assert finding.evidence["clearer"] is None
    assert "a write gradcheck does not see as a zero step (x.grad.zero_(), fill_(0)" in finding.message
    assert "(3 of 3 passes)" in finding.message


@pytest.mark.slow
def test_newtons_drone_with_its_zero_step_before_the_optimizer_step(tmp_path):
    """The issue's own case: Newton's diffsim_drone with ``self.tape.zero()`` moved from the end of step_optimizer
    to just before ``self.optimizer.step(...)``: warp.optim.SGD's launch reads all zeros. The unmodified example
    (tests/test_exec.py) reports only its write-after-read warning."""
    import newton.examples

    from gradcheck.scenarios._featherstone import newton_missing

    if newton_missing():
        pytest.skip(newton_missing())
    text = (Path(newton.examples.__file__).parent / "diffsim" / "example_diffsim_drone.py").read_text()
    step = "        self.optimizer.step([self.rollouts.trajectories.grad.flatten()])\n"
    tail = "            outputs=(self.rollouts.trajectories,),\n        )\n        self.tape.zero()\n"
    assert text.count(step) == 1 and text.count(tail) == 1, "the drone example changed: update this test"
    moved = text.replace(tail, tail.removesuffix("        self.tape.zero()\n"))
    moved = moved.replace(step, "        self.tape.zero()\n" + step)
    program = tmp_path / "example_diffsim_drone.py"
    program.write_text(moved)
    zero_line = moved.splitlines().index("        self.tape.zero()") + 1

    proc, scenario = exec_json(str(program), "--viewer", "null", "--num-frames", "2", "--device", "cpu")
    assert not scenario.get("error"), proc.stderr[-3000:]
    loud = {(f["check"], f["severity"], f["subject"]) for f in scenario["findings"] if f["severity"] != "info"}
    assert loud == {
        ("mutated-gradient", "error", "example.rollouts.trajectories.grad"),
        ("write-after-read", "warning", "example.rollouts.controls[*].prop_controls"),  # the example's own
    }
    (finding,) = [f for f in scenario["findings"] if f["check"] == "mutated-gradient"]
    assert finding["evidence"]["clearer"] == f"tape.zero() at example_diffsim_drone.py:{zero_line}"
    assert finding["evidence"]["update"] == f"launch sgd_step_kernel (example_diffsim_drone.py:{zero_line + 1})"
    assert finding["evidence"]["iterations"] == list(range(1, scenario["passes"] + 1))  # every optimizer step
