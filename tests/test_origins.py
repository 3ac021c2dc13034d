"""nonfinite and explosion say where the bad gradient started: the first backward launch (kernel, line, step of a
rollout) whose adjoint output went non-finite or past --max-norm, found by bisection over the tape
(gradcheck.diagnose.backward_origin), under exec and run alike; clean twins carry no origin."""

from __future__ import annotations

import pytest
from conftest import TESTS, audited

ROLLOUT = TESTS / "programs" / "exec" / "nan_rollout.py"
ROLLOUT_SOURCE = ROLLOUT.read_text().splitlines()
MAGNITUDE_LINE = next(i for i, line in enumerate(ROLLOUT_SOURCE, 1) if "wp.launch(magnitude" in line)
CORPUS = TESTS / "programs" / "equivalence"
STEEP_LINE = next(
    i for i, line in enumerate((CORPUS / "model.py").read_text().splitlines(), 1) if "wp.launch(steep" in line
)
STEPS = 10
ZERO_AT_STEP = int(1.75 / 0.25) + 1  # x0 = 1.75 drifts by -0.25 a step: exactly 0 at the 8th state


def _one(result, check):
    found = [f for f in result.findings if f.check == check and f.severity.label == "error"]
    assert len(found) == 1, [(f.check, f.message) for f in result.findings]
    return found[0]


def test_a_nan_that_starts_mid_rollout_is_traced_to_its_launch_and_step():
    finding = _one(audited(ROLLOUT, "--steps", str(STEPS)), "nonfinite")
    origin = finding.evidence["origin"]
    assert (origin["kernel"], origin["step"], origin["steps"]) == ("magnitude", ZERO_AT_STEP, STEPS)
    assert origin["site"].endswith(f"nan_rollout.py:{MAGNITUDE_LINE}")
    assert origin["array"] == "magnitude.x.grad"
    assert f"step {ZERO_AT_STEP} of {STEPS}" in finding.message and "magnitude (nan_rollout.py:" in finding.message


def test_the_guarded_rollout_has_no_nonfinite_finding():
    result = audited(ROLLOUT, "--steps", str(STEPS), "--eps")
    assert not [f for f in result.findings if f.check == "nonfinite"]


@pytest.mark.slow  # a whole process (or Newton's kernels): the long lane
def test_the_program_output_is_what_python_prints(tmp_path):
    """The bisection runs partial backwards on the program's tape: its gradients must be put back exactly (the NaN
    count the program itself would read stays 1 of 2)."""
    import subprocess
    import sys

    plain = subprocess.run([sys.executable, str(ROLLOUT)], capture_output=True, text=True, timeout=300)
    audited = subprocess.run(
        [
            sys.executable,
            "-m",
            "gradcheck",
            "exec",
            "--format",
            "json",
            "--output",
            str(tmp_path / "r.json"),
            str(ROLLOUT),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = lambda out: [line for line in out.splitlines() if line.startswith("iter ")]  # noqa: E731
    assert lines(audited.stdout) == lines(plain.stdout) and lines(plain.stdout)
    assert "starts in backward at launch" in (tmp_path / "r.json").read_text()


@pytest.mark.parametrize(
    ("mistake", "check", "kernel"), [("nan", "nonfinite", "distance"), ("explosion", "explosion", "steep")]
)
def test_run_and_exec_name_the_same_origin(mistake, check, kernel):
    import gradcheck

    report = gradcheck.check(str(CORPUS / "as_scenario.py"), passes=2, fault=mistake, fd="off", replay=False)
    (ran,) = report.scenarios
    executed = audited(CORPUS / "as_script.py", "--mistake", mistake)
    origins = [_one(r, check).evidence["origin"] for r in (ran, executed)]
    assert origins[0] == origins[1]
    assert origins[0]["kernel"] == kernel
    if mistake == "explosion":
        assert origins[0]["site"].endswith(f"model.py:{STEEP_LINE}")


def test_clean_corpus_has_no_origin():
    result = audited(CORPUS / "as_script.py", "--mistake", "clean")
    assert not [f for f in result.findings if "origin" in f.evidence]
