"""explosion on training runs (issue 39, item 1): divergence is an error, a steep or maximised objective is not, and
a --max-norm the user gives is a promise.

The corpus is tests/programs/divergence: quadratic.py (a quadratic bowl whose largest curvature is K, so gradient
descent diverges past a step of 2/K), train.py (training loops on it, under ``gradcheck exec``: in process through
audit_program) and as_scenario.py (the same bowl as a scenario, under ``gradcheck run``: gradcheck.check).
"""

from __future__ import annotations

import json

import pytest
from conftest import TESTS, audited, cli, cli_in_process

from gradcheck.checks import explosion
from gradcheck.model.exit_codes import ExitCode
from gradcheck.model.growth import GrowthRun, UpdateStep
from gradcheck.model.options import DEFAULT_CHECKS, CheckOptions
from gradcheck.model.trace import NormSample, ParamTrace, Trace

CORPUS = TESTS / "programs" / "divergence"
SCRIPT, SCENARIO = str(CORPUS / "train.py"), str(CORPUS / "as_scenario.py")
# the training loop's update launch (the backtracking search has its own, marked "the trial step")
UPDATE = next(
    n for n, line in enumerate(open(SCRIPT, encoding="utf-8"), 1) if line.endswith("inputs=[x, x.grad, lr])\n")
)


def _exec(*argv: str, checks: CheckOptions = DEFAULT_CHECKS, cadence=None):
    result = audited(SCRIPT, *argv, checks=checks, cadence=cadence)
    return [f for f in result.findings if f.check == "explosion"], result


def _run(fault: str | None = None, max_norm: float | None = None):
    import gradcheck

    report = gradcheck.check(SCENARIO, passes=3, fault=fault, fd="off", replay=False, max_norm=max_norm)
    (result,) = report.scenarios
    assert result.error is None, result.error
    return [f for f in result.findings if f.check == "explosion"]


# -- exec: the training loops ---------------------------------------------------------------------------------------


def test_diverging_descent_is_an_error_naming_the_update_where_it_started():
    """Step 2.5/K: the loss 1.25e4 → 3.7e7 and the gradient 1.4e4 → 8.7e5 in 11 updates, all below the default
    --max-norm (no norm rule fires), each update against the gradient and larger than the last."""
    (finding,) = _exec("--mode", "descent", "--step", "2.5")[0]
    assert (finding.severity.label, finding.subject) == ("error", "x.grad")
    run = finding.evidence["divergence"]
    assert run["start"] == 1 and run["end"] == 12 and run["steps"] == 11
    assert run["descent"] == run["updates_measured"] >= 2 and run["ascent"] == 0
    assert run["update_sizes"][1] > run["update_sizes"][0]
    assert run["update_site"].endswith(f"train.py:{UPDATE}") and run["nonfinite_at"] is None
    assert finding.evidence["peak"] < DEFAULT_CHECKS.max_norm
    assert f"diverges: from the update after backward 1 (the update at train.py:{UPDATE})" in finding.message
    assert "learning rate" in finding.hint and "clip" in finding.hint


def test_five_iterations_of_a_step_past_two_over_l_are_enough():
    """The issue's loop: five iterations of a step past 2/L, the loss up by orders of magnitude at each."""
    (finding,), _ = _exec("--mode", "descent", "--step", "30", "--iterations", "5")
    assert finding.severity.label == "error" and finding.evidence["divergence"]["start"] == 1
    assert _exec("--mode", "descent", "--step", "30", "--iterations", "4")[0][0].severity.label != "error"


def test_the_same_loop_with_a_safe_step_is_silent():
    assert _exec("--mode", "descent", "--step", "0.5")[0] == []


def test_a_divergence_ending_in_inf_is_an_error_that_says_so():
    findings, result = _exec("--mode", "descent", "--step", "30", "--iterations", "30")
    (finding,) = findings
    assert finding.severity.label == "error" and finding.evidence["divergence"]["nonfinite_at"] is not None
    assert f"at backward {finding.evidence['divergence']['nonfinite_at']} it went NaN/Inf" in finding.message


def test_a_late_divergence_is_followed_past_the_audit_cadence():
    """Audited in full only for 4 backwards, then pairs every 8th: once the loss and gradient grow across a pair,
    each next backward is audited, so the divergence (from about backward 10) is seen update by update."""
    (finding,), result = _exec(
        "--mode", "descent", "--step", "2.5", "--safe-until", "6", "--iterations", "24", cadence=(4, 8)
    )
    assert finding.severity.label == "error"
    run = finding.evidence["divergence"]
    assert run["end"] == 24 and run["steps"] >= 5 and run["start"] >= 9
    assert result.sampling is not None  # the cadence did sample: the extension, not an audit of everything


def test_a_loss_that_grows_while_the_program_descends_without_overshooting_is_no_divergence():
    """The loss, gradient and steps grow for good, but every step lands short of the minimum (the next gradient
    points the same way): a penalty tripled every iteration (an info once past --max-norm, a steep objective), a
    target that moves away as fast as the steps reach it (silent)."""
    (steep,) = _exec("--mode", "stiffening")[0]
    assert steep.severity.label == "info" and steep.evidence["tracks_loss"] is True
    assert _exec("--mode", "moving-target")[0] == []


def test_a_divergence_updated_on_the_host_is_an_error():
    """x.assign(x.numpy() - lr * x.grad.numpy()): no update launch, x is a leaf to the observer, and only the measured
    steps (against the gradient, past the minimum, growing) show the program trains it and diverges."""
    (finding,), _ = _exec("--mode", "host")
    assert finding.severity.label == "error" and finding.subject == "x.grad"
    assert finding.evidence["divergence"]["update_site"] is None and "the training diverges" in finding.message


def test_growth_that_recovers_is_silent():
    """Seven diverging warm-up updates (the loss ×117), then a converging step: the loss falls for good."""
    assert _exec("--mode", "warmup", "--iterations", "20")[0] == []
    assert _exec("--mode", "backtrack")[0] == []  # a line search: a trial that grows is undone, the step halved


def test_gradient_ascent_on_a_growing_objective_is_no_error():
    """x += step g: the loss, gradient and update grow as a divergence's do, but along the gradient (the program
    maximises): silent below --max-norm, an info above it."""
    assert _exec("--mode", "ascent", "--step", "0.5")[0] == []
    (finding,) = _exec("--mode", "ascent", "--step", "0.5", "--iterations", "16")[0]
    assert finding.severity.label == "info" and finding.evidence["ascent"] is True
    assert "gradient ascent" in finding.message


def test_a_penalty_switching_on_once_is_an_info_as_before():
    """Loss 1.7 → 1.1e7 on one backward (Newton's drone MPC meeting its collision penalty): the gradient grew only
    as the loss did."""
    (finding,) = _exec("--mode", "penalty")[0]
    assert finding.severity.label == "info" and finding.evidence["tracks_loss"] is True
    assert "only as the loss grew" in finding.message and finding.evidence["max_norm_given"] is False


def test_a_max_norm_given_is_a_promise_whatever_the_loss_did():
    """The same penalty at 1e3: a norm of ~2.1e3. The default bound says nothing; a bound of 100 given is broken;
    and the 1e7 penalty, an info under the default 1e6, is an error when 1e6 is given explicitly."""
    assert _exec("--mode", "penalty", "--penalty", "1e3")[0] == []
    (given,) = _exec("--mode", "penalty", "--penalty", "1e3", checks=CheckOptions(max_norm=100))[0]
    assert given.severity.label == "error" and given.evidence["max_norm_given"] is True
    assert given.evidence["peak"] > 100 and "the bound you gave" in given.message
    (explicit,) = _exec("--mode", "penalty", checks=CheckOptions(max_norm=DEFAULT_CHECKS.max_norm))[0]
    assert explicit.severity.label == "error" and explicit.evidence["tracks_loss"] is False


def test_max_norm_on_the_command_line_is_given():
    """Through the real CLI (exec's plain command line): --max-norm 100 makes the steep penalty an error, exit 1."""
    proc = cli("exec", "--format", "json", "--max-norm", "100", SCRIPT, "--mode", "penalty", "--penalty", "1e3")
    assert proc.returncode == ExitCode.FINDINGS, proc.stderr[-2000:]
    data = json.loads(proc.stdout[proc.stdout.index("{\n") :])
    (finding,) = [f for f in data["scenarios"][0]["findings"] if f["check"] == "explosion"]
    assert finding["severity"] == "error" and finding["evidence"]["max_norm"] == 100


# -- run: the scenario form ----------------------------------------------------------------------------------------


def test_under_run_a_gradient_far_above_max_norm_stays_an_error():
    """The params are restored every pass: no update is seen growing. The scenario form of the mistake, its
    gradient (1.4e8) above --max-norm, is an explosion error as before; the clean bowl (1.4e4) is silent."""
    assert _run() == []
    (finding,) = _run("huge-gradient")
    assert (finding.severity.label, finding.subject) == ("error", "x.grad")
    assert "divergence" not in finding.evidence and finding.evidence["max_norm_given"] is False
    (given,) = _run(max_norm=1e3)  # the clean bowl under a bound the user gave
    assert given.severity.label == "error" and "the bound you gave" in given.message


def test_run_and_exec_judge_the_mistake_alike():
    """The diverging loop under exec and its scenario form under run: the same check, severity and subject."""
    executed = {(f.check, f.severity.label, f.subject) for f in _exec("--mode", "descent", "--step", "2.5")[0]}
    ran = {(f.check, f.severity.label, f.subject) for f in _run("huge-gradient")}
    assert ran == executed == {("explosion", "error", "x.grad")}


def test_max_norm_given_to_run_and_to_audit():
    """``run --max-norm`` (in process) and ``gradcheck.audit(max_norm=...)`` give the bound; leaving it out does not."""
    from gradcheck.auditing import Audit

    proc = cli_in_process("run", SCENARIO, "--max-norm", "1e3", "--passes", "2", "--fd", "off", "--no-replay")
    assert proc.returncode == ExitCode.FINDINGS and "the bound you gave" in " ".join(proc.stdout.split())
    assert Audit(max_norm=100).checks.max_norm_given and not Audit().checks.max_norm_given
    assert not CheckOptions().max_norm_given and CheckOptions().max_norm == DEFAULT_CHECKS.max_norm == 1e6


# -- the rule on hand-made evidence (no Warp) ---------------------------------------------------------------------


def _trace(run: GrowthRun | None, peak: float = 10.0) -> Trace:
    history = tuple(NormSample(i, peak * i / 12, 100.0 * i) for i in range(1, 13))
    param = ParamTrace("x", "x.grad", (4,), "float32", (), role="updated", history=history,
                       peak=history[-1], measured=12, growth=run)  # fmt: skip
    return Trace("t", None, "cpu", params=(param,), fixed_params=False)


def _growth(
    steps: int = 6, descent: int = 4, ascent: int = 0, measured: int = 4, grew: bool = True, overshoots: int = 4
) -> GrowthRun:
    first, last = UpdateStep(3, 1.0, -1.0, -0.9), UpdateStep(6, 5.0, -5.0, -0.9)
    return GrowthRun(1, 1 + steps, (1.0, 1e3), (1.0, 40.0), measured, descent, ascent, grew, overshoots, first, last)


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        (_growth(), "error"),
        (_growth(steps=4), "error"),  # four growing updates, five backwards: the smallest divergence
        (_growth(steps=3), None),  # three growing updates: not yet a divergence
        (_growth(descent=3, ascent=1), None),  # one measured update went along the gradient: no verdict
        (_growth(grew=False), None),  # bounded steps (an Adam-like update): no divergence
        (_growth(overshoots=3), None),  # one update did not step past the minimum (the gradient kept its direction)
        (_growth(measured=0, descent=0), "info"),  # updates not measured: said, no verdict
        (None, None),
    ],
)
def test_the_divergence_rule(run, expected):
    findings = explosion.check(_trace(run), CheckOptions())
    assert [f.severity.label for f in findings] == ([expected] if expected else [])


def test_an_early_nan_does_not_hide_a_later_divergence():
    """The watch keeps following a gradient after a run that ended in NaN: the longer of that run and the one under
    way at the end is the evidence (an early blow-up the program recovered from does not hide a later divergence)."""
    from types import SimpleNamespace

    from gradcheck.observe.divergence import GrowthWatch

    watch = GrowthWatch()
    losses = [1.0, 2.0, 4.0, float("nan"), 1.0, 0.5, 1.0, 3.0, 9.0, 27.0, 81.0, 243.0]
    for index, loss in enumerate(losses, 1):
        norm = loss if loss == loss else float("nan")
        stats = {"x": SimpleNamespace(norm=norm, nonfinite=int(loss != loss))}
        watch.after_backward(index, loss, stats, {}, {})
    run = watch.run("x")
    assert (run.start, run.end, run.nonfinite_at) == (6, 12, None)  # the later, longer run, not the early blow-up
