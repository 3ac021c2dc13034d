"""``torch.autograd.grad`` audited at the torch<->Warp bridge (issue 43): a Warp Function checked with
``torch.autograd.gradcheck`` and trained with ``torch.autograd.grad`` (tests/programs/torch/autograd_grad.py). A
correct Function is silent; one that zeroes the ``grad_outputs`` the program passed, one whose backward is not
reentrant and one whose tape is reused are errors naming the tensor and the call. Each fault is proven by torch's
own verdict (the program prints what ``torch.autograd.gradcheck`` said) or by the loss it trains to.

Needs torch (``make test-torch``; ``make test`` skips this module).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

torch = pytest.importorskip("torch", reason="torch is an optional extra: `make test-torch` runs these tests")

from conftest import TESTS, exec_json  # noqa: E402

PROGRAM = str(TESTS / "programs" / "torch" / "autograd_grad.py")
CASES = ("clean", "grad-outputs-zeroed", "not-reentrant", "tape-reused")
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def runs() -> dict:
    jobs = {("gradcheck", c): (PROGRAM, "--mode", "gradcheck", "--case", c) for c in CASES}
    jobs |= {("functional", c): (PROGRAM, "--mode", "functional", "--case", c) for c in ("clean", "tape-reused")}
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {key: pool.submit(exec_json, *args, env={"WARP_DEVICE": "cpu"}, timeout=300) for key, args in jobs.items()}  # fmt: skip
    return {key: future.result() for key, future in futures.items()}


def _errors(scenario) -> dict:
    return {f["subject"]: f for f in scenario["findings"] if f["severity"] == "error"}


def test_torch_gradcheck_of_a_correct_warp_function_is_silent(runs):
    proc, scenario = runs[("gradcheck", "clean")]
    assert proc.returncode == 0 and "gradcheck: True" in proc.stdout, proc.stderr[-2000:]
    assert scenario["findings"] == [], scenario["findings"]


def test_grad_outputs_zeroed_by_warp_is_an_error_naming_the_tensor_and_the_call(runs):
    proc, scenario = runs[("gradcheck", "grad-outputs-zeroed")]
    assert "gradcheck: False" in proc.stdout  # torch's own verdict: the fault is real
    found = _errors(scenario)["torch.autograd.grad grad_outputs[0]"]
    assert found["check"] == "torch-bridge" and proc.returncode == 1
    assert "torch.autograd.grad call #1 (autograd_grad.py:" in found["message"]
    assert "zeroed in place" in found["message"] and "WarpTanh.backward" in found["message"]
    assert "grad_output.clone()" in found["hint"]


@pytest.mark.parametrize("case", ["not-reentrant", "tape-reused"])
def test_a_backward_that_is_not_reentrant_is_an_error_naming_the_earlier_call(runs, case):
    proc, scenario = runs[("gradcheck", case)]
    assert "gradcheck: False" in proc.stdout  # torch's own verdict: the fault is real
    errors = _errors(scenario)
    assert {"ctx.x.grad", "ctx.scale.grad"} <= set(errors) and proc.returncode == 1
    reused = errors["ctx.x.grad"]
    assert reused["evidence"]["kind"] == "tape-reused"
    assert "held the adjoint of torch.autograd.grad call #" in reused["message"]
    assert "backward #0" not in reused["message"]  # no torch backward ran: the call is named instead


def test_training_through_torch_autograd_grad(runs):
    clean_proc, clean = runs[("functional", "clean")]
    reused_proc, reused = runs[("functional", "tape-reused")]
    assert clean_proc.returncode == 0 and clean["findings"] == [], clean["findings"]
    # the proof: the reused tape trains to another loss than the correct Function
    assert clean_proc.stdout.split("loss ")[1][:8] != reused_proc.stdout.split("loss ")[1][:8]
    assert {"ctx.x.grad", "ctx.scale.grad"} <= set(_errors(reused)) and reused_proc.returncode == 1
