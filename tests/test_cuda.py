"""On a GPU, where Warp sees one (skipped elsewhere; CI has none): the CUDA path end to end. gradcheck's own
kernels load and run there (selftest), a Newton scenario runs and its fault is caught under ``run``, the
equivalence corpus gets the same verdicts from ``run`` and ``exec`` on CUDA as on CPU, and Newton's diffsim
examples, which capture forward+backward in a CUDA graph on a GPU, are audited replay by replay.

``make test`` on a GPU machine runs these with the rest; the captured-graph tests (test_captured_graphs.py) also
take a CUDA variant."""

from __future__ import annotations

import pytest
from conftest import cli, cli_json, exec_json
from test_equivalence import EXPECTED, RUN_ONLY, SCENARIO, SCRIPT

from gradcheck.model.exit_codes import ExitCode


@pytest.fixture(scope="module", autouse=True)
def _cuda():
    import warp as wp

    wp.init()
    if not wp.get_cuda_device_count():
        pytest.skip("no CUDA device")


def test_selftest_on_cuda():
    proc = cli("selftest", "--device", "cuda:0")
    assert proc.returncode == ExitCode.OK, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_cartpole_on_cuda_clean_and_its_fault_caught():
    from gradcheck.scenarios._featherstone import newton_missing

    if newton_missing():
        pytest.skip(newton_missing())
    proc, data = cli_json("run", "cartpole", "--device", "cuda:0", "--passes", "3", "--set", "steps=30")
    (scenario,) = data["scenarios"]
    assert scenario["device"] == "cuda:0" and not scenario.get("error"), proc.stderr[-3000:]
    assert [f for f in scenario["findings"] if f["severity"] == "error"] == []
    proc, data = cli_json(
        "run", "cartpole", "--device", "cuda:0", "--passes", "3", "--set", "steps=30", "--fault", "no-zero"
    )
    assert proc.returncode == ExitCode.FINDINGS
    (scenario,) = data["scenarios"]
    assert any(f["check"] == "accumulation" and f["severity"] == "error" for f in scenario["findings"])


@pytest.mark.parametrize("mistake", list(EXPECTED))
def test_run_and_exec_judge_the_same_mistake_alike_on_cuda(mistake):
    import gradcheck
    from gradcheck.engine.program_audit import audit_program

    fault = None if mistake == "clean" else mistake
    (ran,) = gradcheck.check(SCENARIO, device="cuda:0", passes=3, fault=fault, fd="off", replay=False).scenarios
    assert ran.error is None and ran.device == "cuda:0", ran.error
    import warp as wp

    # the script launches on the default device, as a script on a GPU machine does (the suite pins the CPU)
    with wp.ScopedDevice("cuda:0"):
        executed, run = audit_program(SCRIPT, ["--mistake", mistake, "--device", "cuda:0"], keep_going=True)
    assert run.status in (None, 0) and executed.error is None, run.error
    assert executed.device.startswith("cuda")

    def verdicts(result):
        return {(f.check, f.severity.label, f.subject) for f in result.findings if f.check not in RUN_ONLY}

    internal = [f.evidence.get("traceback") or f.message for f in executed.findings if f.check == "internal-error"]
    assert verdicts(ran) == verdicts(executed), "\n".join(internal)
    if EXPECTED[mistake] is not None:
        assert EXPECTED[mistake] in verdicts(executed)


@pytest.mark.parametrize("example", ["diffsim_ball", "diffsim_drone"])
def test_newtons_diffsim_examples_captured_on_cuda_audit_as_on_cpu(example):
    """On a GPU the examples capture forward+backward in a graph (on CPU they run it from Python): the verdicts
    must not change. The drone's write-after-read is found by replaying its captured forward from copies."""
    from gradcheck.scenarios._featherstone import newton_missing

    if newton_missing():
        pytest.skip(newton_missing())
    args = ["-m", "newton.examples", example, "--viewer", "null", "--num-frames", "2", "--device", "cuda:0"]
    proc, scenario = exec_json(*args)
    internal = [
        f["evidence"].get("traceback") or f["message"] for f in scenario["findings"] if f["check"] == "internal-error"
    ]
    assert not internal, "\n".join(internal)
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
    assert scenario["passes"] >= 1 and not scenario.get("error")
    assert [p["role"] for p in scenario["params"]] == ["updated"]
    assert any("audited as a backward" in n for n in scenario["notes"]), scenario["notes"]
    loud = [(f["check"], f["severity"], f["subject"]) for f in scenario["findings"] if f["severity"] != "info"]
    if example == "diffsim_drone":
        assert loud == [("write-after-read", "warning", "example.rollouts.controls[*].prop_controls")], scenario[
            "notes"
        ]
    else:
        assert loud == []
