"""Reads of a gradient the optimizer step rewrote in place (issue 43), the ways real loops make them: each read
after the step is a ``mutated-gradient`` error naming the step and what the program called to read, and its clean
twin (the same read before the step) is silent; so are a copy never read, a buffer the program zeroes itself, and no
read at all. The program trains a network with a Warp stage (tests/programs/torch/grad_reads.py).

Needs torch (``make test-torch``; ``make test`` skips this module); the TensorBoard read needs the tensorboard
package, which the torch lane installs.
"""

from __future__ import annotations

import importlib.util
from concurrent.futures import ThreadPoolExecutor

import pytest

torch = pytest.importorskip("torch", reason="torch is an optional extra: `make test-torch` runs these tests")

from conftest import TESTS, exec_json  # noqa: E402

PROGRAM = str(TESTS / "programs" / "torch" / "grad_reads.py")
EVERY = {f"model.{p}.grad" for p in ("encoder.weight", "encoder.bias", "scale", "head.weight", "head.bias")}
# read -> (the subjects it reads, what the finding must name as the reader)
FAULTS = {
    "clip-inf": (EVERY, "torch.nn.utils.clip_grad.clip_grad_norm_ -> torch._foreach_norm (grad_reads.py:"),
    "clip-2": (EVERY, "clip_grad_norm_ -> torch._foreach_norm (grad_reads.py:"),
    "total-norm": (EVERY, "get_total_norm -> torch._foreach_norm (grad_reads.py:"),
    "foreach-norm": (EVERY, "torch._foreach_norm (grad_reads.py:"),
    "vector-norm": (EVERY, "torch.cat (grad_reads.py:"),
    "item-stat": ({"model.encoder.weight.grad"}, "Tensor.abs (grad_reads.py:"),
    "data-norm": (EVERY, "Tensor.norm (grad_reads.py:"),
    "histogram": ({"model.encoder.weight.grad"}, "SummaryWriter.add_histogram -> Tensor.numpy (grad_reads.py:"),
    "own-update": (EVERY, "Tensor.add_ (grad_reads.py:"),
}
SILENT_AFTER = ("clone-unread", "zeroed", "none")
HAS_TENSORBOARD = importlib.util.find_spec("tensorboard") is not None
DEADLINE = 300
pytestmark = pytest.mark.timeout(900)


def _wanted(read: str) -> bool:
    return read != "histogram" or HAS_TENSORBOARD


@pytest.fixture(scope="module")
def runs() -> dict:
    jobs = {(r, w): (PROGRAM, "--read", r, "--when", w) for r in FAULTS for w in ("after", "before") if _wanted(r)}
    jobs |= {(r, "after"): (PROGRAM, "--read", r, "--when", "after") for r in SILENT_AFTER}
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {key: pool.submit(exec_json, *args, env={"WARP_DEVICE": "cpu"}, timeout=DEADLINE) for key, args in jobs.items()}  # fmt: skip
    return {key: future.result() for key, future in futures.items()}


def _skip_without(read: str) -> None:
    if not _wanted(read):
        pytest.skip("TensorBoard's histogram needs the tensorboard package (the torch lane installs it)")


@pytest.mark.parametrize("read", sorted(FAULTS))
def test_a_read_after_the_step_is_an_error_naming_the_step_and_the_reader(runs, read):
    _skip_without(read)
    proc, scenario = runs[(read, "after")]
    subjects, reader = FAULTS[read]
    found = [f for f in scenario["findings"] if f["check"] == "mutated-gradient"]
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert {f["subject"] for f in found} == subjects
    assert all(f["severity"] == "error" for f in scenario["findings"]), scenario["findings"]
    for finding in found:
        evidence = finding["evidence"]
        assert "RewritingAdamW.step() (grad_reads.py:" in evidence["writer"]
        assert reader in evidence["reader"], evidence["reader"]
        # the proof, in the evidence itself: what was read is not what backward produced
        assert abs(evidence["read_norm"] - evidence["produced_norm"]) > 0.1 * evidence["produced_norm"]


@pytest.mark.parametrize("read", sorted(FAULTS))
def test_the_same_read_before_the_step_is_silent(runs, read):
    _skip_without(read)
    proc, scenario = runs[(read, "before")]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert scenario["findings"] == [], scenario["findings"]


@pytest.mark.parametrize("read", SILENT_AFTER)
def test_a_copy_never_read_a_buffer_zeroed_by_the_program_and_no_read_are_silent(runs, read):
    proc, scenario = runs[(read, "after")]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert scenario["findings"] == [], scenario["findings"]
