"""Acceptance for the cartpole scenario on Newton's SolverFeatherstone (CPU, real kernels)."""

from __future__ import annotations

import pytest
from conftest import by_check, cli_json, run_scenario

from gradcheck.model.exit_codes import ExitCode
from gradcheck.model.findings import Severity


@pytest.mark.slow
def test_per_step_scratch_20_passes_is_clean_through_the_cli():
    proc, data = cli_json("run", "cartpole", "--set", "scratch=per-step", "--passes", "20", "--device", "cpu")
    assert proc.returncode == 0, proc.stderr
    (scenario,) = data["scenarios"]
    assert scenario["status"] == "ok"
    assert scenario["findings"] == []
    assert scenario["passes"] == 20
    names = {p["name"] for p in scenario["params"]}
    assert {"states[0].joint_q", "states[0].joint_qd", "controls[0].joint_f", "controls[99].joint_f"} <= names
    for param in scenario["params"]:
        assert len(set(param["norms"])) == 1, param  # bitwise identical passes on CPU
        assert param["norms"][0] > 0
    assert data["exit_code"] == 0


def test_stock_shared_scratch_has_no_accumulation_or_zero_findings():
    result, report = run_scenario("cartpole", passes=5)
    assert result.error is None
    issue2 = [f for f in result.findings if f.check in ("accumulation", "zero-audit", "missing-gradient")]
    assert issue2 == []
    # the live Featherstone bias surfaces at the default horizon as warnings (exit 0): shared scratch rewritten
    assert {f.subject for f in by_check(result.findings, "write-after-read")} >= {"solver.J", "solver.L"}
    assert by_check(result.findings, "reentrancy")
    assert all(f.severity == Severity.WARNING for f in result.findings)
    assert report.exit_code == ExitCode.OK


ONE_PASS_STEPS = 10  # the one-pass runs below: every launch of the pass is replayed by the per-launch test


@pytest.fixture(scope="module")
def one_pass():
    """One pass of a short cartpole per scratch mode ("shared": stock), every launch's adjoint tested (--blame
    always): the bit-identity test reads both runs' losses, the per-launch test their blame."""
    from gradcheck.engine.pipeline import run
    from gradcheck.model.options import BlameMode, RunOptions

    runs = {}
    for scratch in ("per-step", "shared"):
        settings = {"steps": ONE_PASS_STEPS, "scratch": scratch}
        options = RunOptions(device="cpu", passes=1, settings=settings, blame=BlameMode.always)
        (runs[scratch],) = run(["cartpole"], options).scenarios
    return runs


def test_per_step_forward_is_bit_identical_to_stock(one_pass):
    stock, per_step = one_pass["shared"], one_pass["per-step"]
    assert stock.error is None and per_step.error is None
    assert len(stock.losses) == 1 and stock.losses == per_step.losses


def test_no_zero_accumulates_on_initial_state_and_names_survivors():
    result, report = run_scenario("cartpole", fault="no-zero", passes=5)
    accumulation = by_check(result.findings, "accumulation")
    subjects = {f.subject for f in accumulation}
    assert {"states[0].joint_q.grad", "states[0].joint_qd.grad"} <= subjects
    assert all(f.severity == Severity.ERROR for f in accumulation)
    joint_q = next(f for f in accumulation if f.subject == "states[0].joint_q.grad")
    assert joint_q.evidence["first_diverging_pass"] == 2
    assert joint_q.evidence["shape"] in ("drift", "superlinear", "linear")

    survivors = [s for f in by_check(result.findings, "zero-audit") for s in f.evidence["survivors"]]
    assert any(s.endswith(".joint_qdd.grad") and s.startswith("states[") for s in survivors), survivors
    assert any(s.endswith(".body_ft_s.grad") and s.startswith("states[") for s in survivors), survivors
    assert report.exit_code == ExitCode.FINDINGS


def test_zero_before_backward_accumulates():
    result, report = run_scenario("cartpole", fault="zero-before-backward", passes=4)
    accumulation = by_check(result.findings, "accumulation")
    assert {"states[0].joint_q.grad", "states[0].joint_qd.grad"} <= {f.subject for f in accumulation}
    assert report.exit_code == ExitCode.FINDINGS


@pytest.mark.slow  # the state-in-tape fault, 3 full cartpole passes (~10 s); missing-gradient is proven fast in test_pure_warp_detectors
def test_state_in_tape_reports_missing_gradients():
    result, report = run_scenario("cartpole", fault="state-in-tape", passes=3)
    missing = by_check(result.findings, "missing-gradient")
    subjects = {f.subject for f in missing}
    assert {"states[0].joint_q.grad", "states[0].joint_qd.grad"} <= subjects
    assert all(f.evidence["kind"] == "all-zero" for f in missing)
    assert not by_check(result.findings, "accumulation")
    # forward() re-creates states and controls: a new array may reuse a dropped one's id, which must not pass
    # for a write through inputs= (the shared solver scratch is the only real rewrite here)
    assert {f.subject for f in by_check(result.findings, "write-after-read")} == {f"solver.{m}" for m in "JMPL"}
    assert report.exit_code == ExitCode.FINDINGS


# what the per-launch test finds in one pass: each step's Cholesky launch split (its adjoint a no-op, the solve's
# covers both), and the launches of ten or more of Featherstone's per-step kernels right
SPLIT_CHOLESKY = ONE_PASS_STEPS
OK_AT_LEAST = 10 * ONE_PASS_STEPS


@pytest.mark.parametrize("scratch", ["per-step", "shared"])
def test_featherstone_launches_pass_the_per_launch_adjoint_test(one_pass, scratch):
    """Correct Featherstone, launch by launch: no adjoint is wrong. The Cholesky adjoint is a no-op and the solve's
    covers both: a split adjoint (info). With stock shared scratch no launch is wrong either: its bias comes from
    the rewrites (write-after-read), which the per-launch test does not see, as it replays forward values."""
    result = one_pass[scratch]
    assert result.error is None, result.error
    loud = [f for f in by_check(result.findings, "adjoint-mismatch") if f.severity >= Severity.WARNING]
    assert loud == [], [f.message for f in loud]
    rows = {row.kernel: row for row in result.blame.kernels}
    assert rows["eval_dense_cholesky_batched"].statuses.get("split", 0) == SPLIT_CHOLESKY  # split, found as such
    assert sum(row.statuses.get("ok", 0) for row in rows.values()) >= OK_AT_LEAST  # the rest tested and right
    (split,) = [f for f in by_check(result.findings, "adjoint-mismatch") if f.severity == Severity.INFO]
    assert "split adjoint" in split.message
