"""changed-before-backward sees an input changed outside kernels after the launch that read it, inside the forward:
each input is fingerprinted right after its first reader, not when the recording ends (which saw none of these).
tests/programs/exec/changed_inside_forward.py changes the target after the loss launch read it by assign, fill_,
a write through the CPU view, and an unrecorded wp.copy; refreshing it before any launch reads it is correct."""

from __future__ import annotations

import pytest
from conftest import TESTS, audited

PROGRAM = TESTS / "programs" / "exec" / "changed_inside_forward.py"
SOURCE = PROGRAM.read_text().splitlines()
LOSS_LAUNCH = next(i for i, line in enumerate(SOURCE, 1) if "wp.launch(squared_error" in line)


@pytest.mark.parametrize("change", ["assign", "fill", "numpy-view", "copy"])
def test_a_change_inside_the_forward_after_the_read_is_named_with_its_reader(change):
    result = audited(PROGRAM, "--change", change)
    (found,) = [f for f in result.findings if f.check == "changed-before-backward"]
    assert found.severity.label == "error" and found.subject == "target"
    assert f"squared_error (changed_inside_forward.py:{LOSS_LAUNCH}) read it" in found.message
    assert found.evidence["reader_indices"] == [1]  # predict is launch #0, the loss launch #1


def test_refreshing_the_input_before_any_launch_reads_it_is_silent():
    result = audited(PROGRAM, "--change", "none")
    assert [f for f in result.findings if f.check == "changed-before-backward"] == []


def test_a_write_through_a_view_of_an_input_is_a_launch_on_the_tape_not_a_change():
    """Each step writes row t + 1 of the trajectory through a view while reading the whole array: no finding."""
    result = audited(TESTS / "programs" / "exec" / "trajectory_views.py")
    assert [f.check for f in result.findings if f.check == "changed-before-backward"] == []


def test_an_input_refreshed_inside_the_forward_whose_value_no_adjoint_reads_is_no_finding():
    """An external force assigned before every step enters additively: the adjoint of every launch that read it
    does not use its values (tested on private copies), so the gradient is exact (AD -0.3590 vs FD -0.3590)."""
    result = audited(TESTS / "programs" / "exec" / "refreshed_force.py")
    assert [f.check for f in result.findings if f.check == "changed-before-backward"] == []
