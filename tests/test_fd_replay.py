"""Finite differences, write-after-read and reentrancy: the live Featherstone bias, custom adjoints, float32."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import SCENARIOS, by_check, cli, cli_in_process, run_scenario

from gradcheck.engine.runner import run_passes
from gradcheck.model.exit_codes import ExitCode
from gradcheck.model.findings import Severity
from gradcheck.model.options import FDOptions

# solver.H is rewritten too, but no adjoint reads its values (the Cholesky's custom adjoint is a no-op, the solve's
# reads L and x): gradcheck.rerun.adjoint_dependence runs them on copies to tell
SCRATCH = {"solver.J", "solver.P", "solver.L"}


@pytest.mark.slow
def test_stock_cartpole_long_horizon_is_caught_by_all_three():
    result, report = run_scenario("cartpole", passes=1, steps="600")
    (fd,) = by_check(result.findings, "fd-mismatch")
    assert fd.severity == Severity.ERROR
    worst = max(e["rel_error"] for e in fd.evidence["elements"])
    assert worst >= 0.1 and fd.evidence["max_direction_error"] > 1e-2
    assert "worst element" in fd.message and fd.subject.startswith(("states[0].", "controls["))
    war = {f.subject for f in by_check(result.findings, "write-after-read")}
    assert SCRATCH <= war
    rewrites = by_check(result.findings, "write-after-read")[0].evidence["rewrites"]
    assert rewrites >= 599  # one per step boundary
    (reentrant,) = by_check(result.findings, "reentrancy")
    changed = reentrant.evidence["changed_during_backward"]
    assert any(name.startswith("solver.") for name in changed)
    assert any(name.endswith(".joint_qdd") for name in changed)
    assert report.exit_code == ExitCode.FINDINGS
    # blamed on the solver's rewrites, not on an adjoint: launch by launch, on forward values, every one is right
    assert "buffers rewritten between forward and backward" in fd.message
    assert [f for f in by_check(result.findings, "adjoint-mismatch") if f.severity >= Severity.WARNING] == []
    assert result.blame.why == "fd-mismatch fired" and result.blame.kernels


@pytest.mark.slow
def test_per_step_scratch_long_horizon_is_clean():
    result, report = run_scenario("cartpole", passes=1, steps="600", scratch="per-step")
    assert result.findings == (), [(f.check, f.message) for f in result.findings]
    assert result.fd.max_direction_error < 1e-2
    assert report.exit_code == ExitCode.OK


def test_wrong_custom_adjoint_names_the_wrong_component():
    path = str(SCENARIOS / "custom_adjoint.py")
    result, _ = run_scenario(path, fault="wrong-adjoint", passes=1)
    (fd,) = by_check(result.findings, "fd-mismatch")
    assert fd.severity == Severity.ERROR
    assert fd.subject.startswith("x[") and fd.subject.endswith("][1]")  # the y component
    worst = fd.evidence["elements"][0]
    assert worst["ad"] == pytest.approx(2 * worst["fd"], rel=1e-3)  # off by exactly 2x
    twin, _ = run_scenario(path, passes=1)
    assert twin.findings == ()


def test_element_mode_on_a_correct_adjoint_is_silent():
    from gradcheck.engine.pipeline import run
    from gradcheck.model.options import RunOptions

    report = run(
        [str(SCENARIOS / "custom_adjoint.py")], RunOptions(device="cpu", passes=1, fd=FDOptions(mode="elements"))
    )
    (result,) = report.scenarios
    assert result.fd.max_element_error is not None and result.fd.max_element_error < 1e-2
    assert result.findings == ()


def test_float32_inputs_near_1e3_give_no_false_mismatch():
    result, _ = run_scenario(str(SCENARIOS / "large_inputs.py"), passes=1)
    assert result.findings == ()
    assert result.fd.max_direction_error < 1e-3


def test_params_are_restored_after_every_perturbation():
    from gradcheck.scenarios.spring_chain import SpringChain

    scenario = SpringChain()
    run_passes(scenario, name="spring-chain", device="cpu", passes=2, fd=FDOptions(mode="elements"), replay=True)
    fresh = SpringChain()
    fresh.setup("cpu")
    np.testing.assert_array_equal(scenario.x.numpy(), fresh.x.numpy())
    np.testing.assert_array_equal(scenario.anchor.numpy(), fresh.anchor.numpy())


@pytest.mark.slow
def test_sweep_shows_the_bias_growing_with_the_horizon(tmp_path):
    stock = cli("sweep", "cartpole", "--set", "steps=10,600", "--format", "json", "--device", "cpu")
    assert stock.returncode == 0, stock.stderr
    rows = {r["value"]: r for r in json.loads(stock.stdout)["rows"]}
    assert rows["600"]["fd_rel_error"] >= 10 * rows["10"]["fd_rel_error"]
    assert rows["600"]["verdict"] in ("warning", "error")
    png = tmp_path / "sweep.png"
    per_step = cli(
        "sweep",
        "cartpole",
        "--set",
        "steps=10,600",
        "--set",
        "scratch=per-step",
        "--format",
        "json",
        "--plot",
        str(png),
        "--device",
        "cpu",
    )
    assert per_step.returncode == 0, per_step.stderr
    rows = {r["value"]: r for r in json.loads(per_step.stdout)["rows"]}
    assert rows["600"]["fd_rel_error"] < 1e-2 and rows["600"]["verdict"] == "ok"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_sweep_needs_exactly_one_list():
    proc = cli("sweep", "cartpole", "--set", "steps=10", "--device", "cpu")
    assert proc.returncode == ExitCode.USAGE
    assert "exactly one --set KEY=V1,V2" in proc.stderr


def test_fd_bands_are_configurable():
    path = str(SCENARIOS / "custom_adjoint.py")
    strict = cli(
        "run",
        path,
        "--fault",
        "wrong-adjoint",
        "--passes",
        "1",
        "--format",
        "json",
        "--fd-error",
        "0.9",
        "--device",
        "cpu",
    )
    (finding,) = [f for f in json.loads(strict.stdout)["scenarios"][0]["findings"] if f["check"] == "fd-mismatch"]
    assert finding["severity"] == "warning" and finding["evidence"]["error"] == 0.9  # 0.5 is below the raised band
    assert strict.returncode == ExitCode.OK
    bad = cli_in_process("run", path, "--fd-warn", "0.5", "--fd-error", "0.1", "--device", "cpu")
    assert bad.returncode == ExitCode.USAGE and "--fd-warn (0.5) must be positive and at most --fd-error" in bad.stderr


def test_fd_is_skipped_with_a_reason_when_forward_returns_a_vector():
    """A scenario seeding its own vector output has no scalar loss: no fd-mismatch from comparing the
    gradient of sum(y) with the derivative of y[0]."""
    result, _ = run_scenario(str(SCENARIOS / "vector_output.py"), passes=2)
    assert result.error is None and result.findings == (), [f.message for f in result.findings]
    assert result.fd.skipped.startswith("forward() returned 3 values, not a scalar loss")
    assert [p.norms[0] for p in result.params] == [pytest.approx((3**2 + 12**2 + 27**2) ** 0.5)]


def test_arrays_written_through_inputs_are_writers():
    """Warp's examples update state in place through inputs=; write-after-read must see those writes (it used
    to treat only outputs= as writers, so only the fd-mismatch symptom was reported)."""
    path = str(SCENARIOS / "in_place.py")
    result, _ = run_scenario(path, fault="inputs-written", passes=2)
    war = {f.subject: f for f in by_check(result.findings, "write-after-read")}
    # vs[0] is rewritten too, but integrate's adjoint is linear in v (it reads x and k): only x's rewrite biases it
    assert set(war) == {"xs[0]"}
    assert "integrate → integrate" in war["xs[0]"].message
    assert by_check(result.findings, "fd-mismatch")  # and the bias it causes is real
    clean, _ = run_scenario(path, passes=2)
    assert clean.error is None and clean.findings == (), [(f.check, f.subject) for f in clean.findings]


def test_fingerprints_compare_values_not_the_sign_of_zero():
    import warp as wp

    from gradcheck.measure.fingerprints import fingerprint

    zeros, negative_zeros = wp.zeros(8, device="cpu"), wp.array([-0.0] * 8, dtype=float, device="cpu")
    assert fingerprint(zeros) == fingerprint(negative_zeros)
    assert fingerprint(zeros) != fingerprint(wp.array([0.0] * 7 + [1e-30], dtype=float, device="cpu"))
