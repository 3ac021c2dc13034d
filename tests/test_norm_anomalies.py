"""Issue-4 detectors on real scenarios: nonfinite, mutated-gradient, vanishing, explosion; and --clip-norm."""

from __future__ import annotations

import pytest
from conftest import SCENARIOS, TESTS, by_check, cli, cli_in_process, cli_json, run_scenario

from gradcheck.engine.pipeline import run
from gradcheck.model.exit_codes import ExitCode
from gradcheck.model.findings import Severity
from gradcheck.model.options import CheckOptions, FDOptions, RunOptions
from gradcheck.scenarios.spring_chain import LR

NEW_CHECKS = ("nonfinite", "explosion", "vanishing", "mutated-gradient")


def test_spring_chain_clean_is_silent():
    result, _ = run_scenario("spring-chain", passes=3)
    assert result.error is None and result.findings == ()


def test_nan_only_in_backward_is_nonfinite_with_a_finite_loss():
    result, report = run_scenario("spring-chain", fault="nan-backward", passes=3)
    (finding,) = by_check(result.findings, "nonfinite")
    assert finding.subject == "x.grad" and finding.severity == Severity.ERROR
    assert finding.evidence["first_pass"] == 1 and finding.evidence["loss_finite"] is True
    assert finding.evidence["nan"] == [6, 6, 6]
    assert "backward alone" in finding.message
    assert [f.check for f in result.findings] == ["nonfinite"]
    assert report.exit_code == ExitCode.FINDINGS


def test_optimizer_writing_into_gradients_is_a_mutated_gradient():
    result, _ = run_scenario("spring-chain", fault="optimizer-in-place", passes=2)
    (finding,) = by_check(result.findings, "mutated-gradient")
    assert finding.subject == "x.grad" and finding.severity == Severity.ERROR
    backward, readout = finding.evidence["produced_norm"], finding.evidence["read_norm"]
    assert readout == pytest.approx(backward * LR, rel=1e-6)  # the seed's "700 vs < 5"
    assert finding.evidence["writer"].startswith("launch sgd_step_in_place (spring_chain.py:")
    assert finding.evidence["reader"] == "the readout after after_backward()"
    assert finding.evidence["iterations"] == [1, 2]
    assert [f.check for f in result.findings] == ["mutated-gradient"]


def test_unit_mismatch_is_vanishing_and_only_for_the_anchor():
    result, _ = run_scenario("spring-chain", fault="unit-mismatch", passes=3)  # vanishing needs 3 backwards
    (finding,) = by_check(result.findings, "vanishing")
    assert finding.subject == "anchor.grad" and finding.severity == Severity.WARNING
    assert finding.evidence["sensitivity"] < 1e-10


@pytest.mark.slow  # a clean Newton pendulum through FD (~11 s); the nonfinite and explosion faults stay fast
def test_short_double_pendulum_is_silent():
    result, _ = run_scenario("double-pendulum", passes=2, steps="200")
    assert result.error is None
    assert not [f for f in result.findings if f.check in NEW_CHECKS]


@pytest.mark.slow
def test_long_horizon_chaos_explodes():
    report = run(
        ["double-pendulum"],
        RunOptions(
            device="cpu",
            passes=1,
            settings={"steps": "3000"},
            checks=CheckOptions(max_norm=1e3),
            fd=FDOptions(mode="off"),  # FD over a chaotic 5 s rollout is slow and rightly fails: not this test
            replay=False,
        ),
    )
    (result,) = report.scenarios
    explosion = by_check(result.findings, "explosion")
    over = [f for f in explosion if f.severity == Severity.ERROR]
    assert {f.subject for f in over} >= {"states[0].joint_q.grad", "states[0].joint_qd.grad"}
    (growth,) = [f for f in explosion if f.severity == Severity.WARNING]
    assert growth.evidence["family"] == "controls[*].joint_f"
    assert growth.evidence["ratio"] > 1e4
    largest = int(growth.evidence["largest"].split("[")[1].split("]")[0])
    smallest = int(growth.evidence["smallest"].split("[")[1].split("]")[0])
    assert largest < smallest  # earlier controls: backprop through more chaotic steps
    assert "toward the start" in growth.message


def test_clip_norm_reports_both_norms_through_the_cli():
    proc, data = cli_json("run", "spring-chain", "--clip-norm", "0.5", "--passes", "2", "--device", "cpu")
    assert proc.returncode == ExitCode.OK, proc.stderr
    (scenario,) = data["scenarios"]
    clip = scenario["clip"]
    assert clip["max_norm"] == 0.5
    assert clip["total_before"][0] > 3.0 and clip["total_after"][0] == pytest.approx(0.5, rel=1e-5)
    x = next(p for p in scenario["params"] if p["name"] == "x")
    assert x["clipped_norms"][0] < x["norms"][0]
    table = cli("run", "spring-chain", "--clip-norm", "0.5", "--passes", "2", "--device", "cpu")
    assert "--clip-norm 0.5: global gradient norm" in table.stdout and "clipped" in table.stdout


@pytest.mark.parametrize("flag", ["--clip-norm", "--max-norm"])
def test_non_positive_thresholds_are_usage_errors(flag):
    proc = cli_in_process("run", "spring-chain", flag, "-1", "--device", "cpu")  # a process: test_options.py
    assert proc.returncode == ExitCode.USAGE
    assert proc.stderr.strip().splitlines()[-1].startswith(f"gradcheck: error: {flag} must be a positive number")


def test_trace_nonfinite_names_the_first_offending_operation():
    proc, data = cli_json(
        "run", "spring-chain", "--fault", "nan-backward", "--passes", "1", "--trace-nonfinite", "--device", "cpu"
    )
    assert proc.returncode == ExitCode.FINDINGS
    (finding,) = [f for f in data["scenarios"][0]["findings"] if f["check"] == "nonfinite"]
    assert finding["evidence"]["verify_fp_first"].startswith("builtin.h:")
    assert "adj_sqrt(0.000000" in finding["evidence"]["verify_fp_first"]  # the sqrt at d = 0
    assert "first offending operation (verify_fp)" in finding["message"]


@pytest.mark.parametrize(
    ("fault", "carrier", "how"),
    [
        ("loss-not-cleared", "loss", "accumulated into without being cleared"),
        ("clock-not-reset", "clock", "read before this forward writes it"),
    ],
)
def test_stateful_forward_names_the_array_that_carries_the_state(fault, carrier, how):
    result, report = run_scenario("spring-chain", fault=fault, passes=3)
    (stateful,) = by_check(result.findings, "stateful-forward")
    assert stateful.severity == Severity.ERROR and report.exit_code == ExitCode.FINDINGS
    assert stateful.subject == carrier
    assert stateful.evidence["carried"] == [stateful.evidence["carried"][0]]  # the root only, not what it fed
    assert stateful.evidence["carried"][0]["how"] == how
    assert len(set(stateful.evidence["losses"])) > 1
    # the finite differences start every rollout from the state the first pass started from (the carrier put
    # back), so they measure the function the tape differentiated, and agree with it
    assert result.fd.skipped is None and result.fd.restored_arrays > 0
    assert not by_check(result.findings, "fd-mismatch")
    # gradient differences across passes follow from it: never blamed on the zero step as an error
    assert all(f.severity < Severity.ERROR for f in by_check(result.findings, "accumulation"))


@pytest.mark.parametrize("fault", [None, "clock-not-reset"])
def test_within_cudas_atomics_noise_the_carried_state_decides(monkeypatch, fault):
    """On CUDA losses are compared within float atomics' noise (1e-4 relative). The spring chain's clock moves the
    loss by less than that while it moves the anchor's gradient by half: the state probe then runs, names the
    clock, and the verdict is stateful-forward, not an accumulation error. The same tolerance on the clean chain
    (loss and gradients repeat): nothing. Simulated on CPU by the tolerance CUDA gets (CI has no GPU; a GPU
    machine runs the real selftest in tests/test_cuda.py)."""
    import gradcheck.engine.runner as runner
    from gradcheck.measure.gradients import CUDA_RTOL

    monkeypatch.setattr(runner, "equality_tolerance", lambda device: CUDA_RTOL)
    result, _ = run_scenario("spring-chain", fault=fault, passes=3)
    losses = result.losses
    assert max(losses) - min(losses) <= CUDA_RTOL * max(abs(x) for x in losses)  # inside the noise band
    if fault is None:
        assert not [f for f in result.findings if f.severity >= Severity.WARNING]
        return
    (stateful,) = by_check(result.findings, "stateful-forward")
    assert stateful.severity == Severity.ERROR and stateful.subject == "clock"
    assert "within CUDA's float-atomics noise" in stateful.message
    assert all(f.severity < Severity.ERROR for f in by_check(result.findings, "accumulation"))


def test_a_nan_gradient_repeated_on_every_pass_is_no_accumulation_within_a_tolerance(monkeypatch):
    """Under CUDA's tolerance gradients are compared by their difference, which a NaN makes NaN: a NaN repeated
    at the same place on every pass must compare equal (the nonfinite check owns it), or every NaN gradient is
    also an accumulation error on a GPU. Simulated on CPU with the tolerance CUDA gets."""
    import gradcheck.engine.runner as runner
    from gradcheck.measure.gradients import CUDA_RTOL

    monkeypatch.setattr(runner, "equality_tolerance", lambda device: CUDA_RTOL)
    result, _ = run_scenario("spring-chain", fault="nan-backward", passes=3)
    assert {f.check for f in result.findings if f.severity >= Severity.WARNING} == {"nonfinite"}


def test_accumulation_still_fires_within_cudas_tolerance(monkeypatch):
    """The other side of the two tests above: under the tolerance CUDA gets, a real accumulation (the
    equivalence corpus's loop that never clears its gradients) is still an accumulation error."""
    import gradcheck.engine.runner as runner
    from gradcheck.measure.gradients import CUDA_RTOL

    monkeypatch.setattr(runner, "equality_tolerance", lambda device: CUDA_RTOL)
    corpus = TESTS / "programs" / "equivalence" / "as_scenario.py"
    result, _ = run_scenario(str(corpus), fault="accumulation", passes=3)
    assert [(f.severity, f.subject) for f in by_check(result.findings, "accumulation")] == [
        (Severity.ERROR, "p.x.grad")
    ]


def test_a_forward_that_resets_its_state_is_not_stateful():
    """The clean spring chain restores nothing itself but clears its loss: same loss every pass, no finding,
    and the finite differences ran (their loss repeated)."""
    result, _ = run_scenario("spring-chain", passes=3)
    assert not by_check(result.findings, "stateful-forward")
    assert len(set(result.losses)) == 1 and result.fd.skipped is None and result.fd.converged


def test_state_outside_arrays_skips_the_finite_differences_and_says_why():
    """A Python attribute carries the state: the arrays put back before each rollout cannot undo it, so the
    loss at the same params still differs and the finite differences are skipped, never misjudged."""
    result, _ = run_scenario(str(SCENARIOS / "python_clock.py"), passes=3)
    (stateful,) = by_check(result.findings, "stateful-forward")
    assert len(set(stateful.evidence["losses"])) == 3
    assert "not a function of the params" in result.fd.skipped
    assert "arrays it holds restored" in result.fd.skipped
    assert not by_check(result.findings, "fd-mismatch")
