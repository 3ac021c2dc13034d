"""A tensor torch keeps for a backward, written by Warp behind torch's back (issue 43): a Function that returns
``wp.to_torch(out)`` of an output array it allocates once, called twice per step, so its second call overwrites the
output the first returned, which ``h1 * w1`` saved (tests/programs/torch/saved_overwrite.py). The error names the
node that saved it, the Function and the call that wrote it again; a copy, an overwrite with identical values and a
Function that recomputes its own saved buffer in its backward are silent. Each case is proven against torch's own
gradients (the program's ``--check``).

Needs torch (``make test-torch``; ``make test`` skips this module).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is an optional extra: `make test-torch` runs these tests")

from conftest import TESTS, exec_cases, worst_difference  # noqa: E402

PROGRAM = TESTS / "programs" / "torch" / "saved_overwrite.py"
WRONG = {"overwritten": ("output", "MulBackward0"), "saved-not-recomputed": ("saved tensor", "WarpSquareBackward")}
CORRECT = ("cloned", "identical", "recomputed")
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def runs() -> dict:
    return exec_cases(PROGRAM, (*WRONG, *CORRECT), env={"WARP_DEVICE": "cpu"})


@pytest.mark.parametrize("case", sorted(WRONG))
def test_a_saved_tensor_warp_overwrote_is_an_error_naming_who_saved_and_who_wrote(runs, case):
    proc, scenario = runs[case]
    what, saver = WRONG[case]
    (found,) = scenario["findings"]
    assert proc.returncode == 1 and found["check"] == "torch-bridge" and found["severity"] == "error"
    assert found["subject"].startswith(f"WarpSquare {what} (saved_overwrite.py:")
    assert found["evidence"]["kind"] == "saved-overwritten"
    assert "the next call of WarpSquare (saved_overwrite.py:" in found["message"]
    assert f"{saver} had saved it" in found["message"] and ".clone()" in found["hint"]


@pytest.mark.parametrize("case", CORRECT)
def test_a_copy_identical_values_and_a_recomputed_buffer_are_silent(runs, case):
    proc, scenario = runs[case]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert scenario["findings"] == [], scenario["findings"]


@pytest.mark.parametrize("case,wrong", [*((c, True) for c in WRONG), *((c, False) for c in CORRECT)])
def test_each_case_against_torchs_own_gradients(case, wrong):
    worst = worst_difference(PROGRAM, "--case", case)
    assert (worst > 0.1) if wrong else (worst < 1e-5), worst


INPLACE = TESTS / "programs" / "torch" / "inplace_input.py"


@pytest.fixture(scope="module")
def inplace_runs() -> dict:
    return exec_cases(INPLACE, ("written", "fresh", "before"), env={"WARP_DEVICE": "cpu"})


def test_an_argument_warp_wrote_in_place_after_an_op_saved_it_is_an_error(inplace_runs):
    """torch's own memory written by Warp through a wp.from_torch alias, after ``h * w`` saved it: an error naming
    the Function, the argument and the node that had saved it; a fresh output, or the write before the op saved
    the tensor (torch then differentiates what it computed), is silent."""
    proc, scenario = inplace_runs["written"]
    (found,) = scenario["findings"]
    assert proc.returncode == 1 and found["severity"] == "error" and found["evidence"]["kind"] == "saved-overwritten"
    assert found["subject"].startswith("WarpRelu argument 0 (inplace_input.py:")
    assert "after MulBackward0 had saved that tensor" in found["message"] and "mark_dirty" in found["hint"]
    for case in ("fresh", "before"):
        proc, scenario = inplace_runs[case]
        assert proc.returncode == 0 and scenario["findings"] == [], (case, scenario["findings"])


@pytest.mark.parametrize("case,wrong", [("written", True), ("fresh", False), ("before", False)])
def test_the_in_place_cases_against_torchs_own_gradients(case, wrong):
    worst = worst_difference(INPLACE, "--case", case)
    assert (worst > 0.1) if wrong else (worst < 1e-5), worst
