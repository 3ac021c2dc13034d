"""A tensor torch saved for a backward, written between the forward and the backward through an alias torch does
not version (issue 43): ``.data``, ``.numpy()``, an assignment to ``.data``, a ``wp.from_torch`` array a Warp
kernel writes (tests/programs/torch/unversioned_write.py). Each is an error naming the tensor, the node that saved
it and the line that wrote it; the same aliases taken only to read, a write that leaves the values as they were, a
write to a copy, and writes before the forward or after the step are silent. Each case is proven against pure
torch's gradients at the values the forward used (the program's ``--check``).

Needs torch (``make test-torch``; ``make test`` skips this module).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is an optional extra: `make test-torch` runs these tests")

from conftest import TESTS, exec_cases, line_of, worst_difference  # noqa: E402

PROGRAM = TESTS / "programs" / "torch" / "unversioned_write.py"
# case -> (the tensor named, the node that saved it, how it was written, the line that took the alias)
WRONG = {
    "clip": ("lin2.weight", "AddmmBackward0", "its .data", "p.data.clamp_(-0.05, 0.05)"),
    "numpy": (
        "scale",
        "MulBackward0",
        "a NumPy array sharing its memory (.numpy())",
        "values = scale.detach().numpy()",
    ),
    "assign": ("scale", "MulBackward0", "an assignment to its .data", "scale.data = scale.data / scale.data.norm()"),
    "warp": ("scale", "MulBackward0", "a Warp array sharing its memory (wp.from_torch)", "wp.launch(normalise"),
}
CORRECT = ("clip-after", "read", "identical", "warp-copy", "before")
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def runs() -> dict:
    return exec_cases(PROGRAM, (*WRONG, *CORRECT), env={"WARP_DEVICE": "cpu"})


@pytest.mark.parametrize("case", sorted(WRONG))
def test_a_saved_tensor_written_through_an_unversioned_alias_is_an_error(runs, case):
    proc, scenario = runs[case]
    name, saver, how, text = WRONG[case]
    (found,) = scenario["findings"]
    line = line_of(PROGRAM, text, after="def write(")
    assert proc.returncode == 1 and found["check"] == "torch-bridge" and found["severity"] == "error"
    assert found["evidence"]["kind"] == "saved-overwritten"
    assert found["subject"] == f"{name} (unversioned_write.py:{line})"
    assert (
        f"{name} was written through {how}, taken at unversioned_write.py:{line}, after {saver} had saved it"
        in (found["message"])
    )
    assert "after backward" in found["hint"]


@pytest.mark.parametrize("case", CORRECT)
def test_reads_identical_values_copies_and_writes_outside_the_window_are_silent(runs, case):
    proc, scenario = runs[case]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert scenario["findings"] == [], scenario["findings"]


@pytest.mark.parametrize("case,wrong", [*((c, True) for c in WRONG), *((c, False) for c in CORRECT)])
def test_each_case_against_pure_torch_at_the_values_the_forward_used(case, wrong):
    worst = worst_difference(PROGRAM, "--case", case)
    assert (worst > 0.1) if wrong else (worst < 1e-5), worst


def test_aliases_taken_before_the_forward_cost_no_fingerprint_and_torch_is_restored():
    """An optimizer's ``p.data`` loop after backward (no node made since) records nothing; aliases taken after the
    forward are recorded only until the backward; on exit ``Tensor.data`` and ``Tensor.numpy`` are torch's again."""
    from gradcheck.pytorch.watch import TorchWatch

    data, numpy = torch._C.TensorBase.__dict__["data"], torch._C.TensorBase.numpy
    w = torch.nn.Parameter(torch.rand(4))
    watch = TorchWatch(lambda: [])
    with watch.installed():
        x = torch.rand(4, requires_grad=True)
        (x * w).sum().backward()
        w.data.add_(1.0)  # the step, before any node of the next forward
        w.detach().numpy()
        assert watch.unversioned.armed and watch.unversioned._accesses == []
        loss = (x * w).sum()
        assert float(w.data.sum()) > 0 and len(watch.unversioned._accesses) == 1  # read only: no finding
        loss.backward()
        assert watch.unversioned._accesses == [] and watch.bridge.issues() == ()
    assert "data" not in vars(torch.Tensor) and "numpy" not in vars(torch.Tensor)
    assert torch.Tensor.data is data and torch.Tensor.numpy is numpy
