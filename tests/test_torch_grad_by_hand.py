"""Parameters backward never gives a gradient, on purpose and by mistake (tests/programs/torch/grad_by_hand.py):
a gradient the program computes itself and sets before the step is not missing; a Parameter the forward reads only
through ``.data`` (a mask kept with the model) is a warning, never an error; a forgotten hand-written gradient and a
``detach()`` by mistake stay errors. On the start commit of this change the correct program had two errors.

Needs torch (``make test-torch``; ``make test`` skips this module).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is an optional extra: `make test-torch` runs these tests")

from conftest import TESTS, exec_cases  # noqa: E402

PROGRAM = TESTS / "programs" / "torch" / "grad_by_hand.py"
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def runs() -> dict:
    return exec_cases(PROGRAM, ("correct", "forgot", "detached"))


def _by_subject(scenario: dict) -> dict:
    return {f["subject"]: f for f in scenario["findings"] if f["check"] == "missing-gradient"}


def test_a_gradient_set_by_hand_is_not_missing_and_a_mask_read_through_data_is_a_warning(runs):
    proc, scenario = runs["correct"]
    found = _by_subject(scenario)
    assert proc.returncode == 0 and set(found) == {"mask.grad"}, scenario["findings"]
    assert found["mask.grad"]["severity"] == "warning"
    assert "reads mask only through .data" in found["mask.grad"]["message"]
    assert "register_buffer" in found["mask.grad"]["hint"]
    assert found["mask.grad"]["evidence"]["break"]["cause"] == "read-through-alias"


@pytest.mark.parametrize("case,subject", [("forgot", "w_fp.grad"), ("detached", "scale.grad")])
def test_a_forgotten_gradient_and_a_detach_by_mistake_stay_errors(runs, case, subject):
    proc, scenario = runs[case]
    found = _by_subject(scenario)
    assert proc.returncode == 1 and found[subject]["severity"] == "error", scenario["findings"]
    assert found[subject]["evidence"]["break"]["cause"] == "unreached"
    assert found["mask.grad"]["severity"] == "warning"
