"""The chain-break walk's edges: what the observer logs beside the tape, and arrays that are not leaves.

- a recorded ``wp.copy``'s destination is an intermediate: its zero gradient after backward is no missing gradient;
- a launch made with ``record_tape=False`` under a recording tape is off the tape: the break names it;
- the walk never names an in-place update of the param (an SGD step) as the launch that read it.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TESTS, audited

EXEC = TESTS / "programs" / "exec"


def test_a_recorded_copy_destination_is_not_a_leaf_with_a_missing_gradient():
    result = audited(EXEC / "copied_intermediate.py")
    assert [(f.check, f.subject) for f in result.findings] == []


@pytest.fixture(scope="module")
def warp_cpu():
    import warp as wp

    wp.init()
    return wp


def test_a_launch_off_the_tape_under_a_recording_tape_is_the_break(warp_cpu):
    import gradcheck

    wp = warp_cpu

    @wp.kernel
    def shift(y: wp.array(dtype=float), o: wp.array(dtype=float), z: wp.array(dtype=float)):
        i = wp.tid()
        z[i] = y[i] + o[0]

    @wp.kernel
    def squares(z: wp.array(dtype=float), loss: wp.array(dtype=float)):
        i = wp.tid()
        wp.atomic_add(loss, 0, z[i] * z[i])

    y = wp.array(np.ones(4, dtype=np.float32), requires_grad=True)
    offset = wp.array([0.5], dtype=float, requires_grad=True)
    z = wp.zeros(4, dtype=float, requires_grad=True)
    with gradcheck.audit(params={"offset": offset}) as audit:
        for _ in range(2):
            loss = wp.zeros(1, dtype=float, requires_grad=True)
            tape = wp.Tape()
            with tape:
                wp.launch(shift, 4, inputs=[y, offset], outputs=[z], record_tape=False)
                wp.launch(squares, 4, inputs=[z], outputs=[loss])
            tape.backward(loss)
            tape.zero()
    (missing,) = [f for f in audit.result.findings if f.check == "missing-gradient"]
    assert missing.evidence["break"]["cause"] == "outside-tape"
    assert "record_tape=False" in missing.message and "shift (test_chain_break_probe.py:" in missing.message


@pytest.mark.slow  # a whole process (or Newton's kernels): the long lane
def test_states_made_again_inside_the_tape_are_named_as_replaced_and_the_gradient_traced_to_the_model():
    """cartpole --fault state-in-tape: params() hands out the states of setup(); forward() makes new ones inside the
    tape with Newton's Model.state(), a recorded wp.copy of model.joint_q. The tape never reads the param: the break
    says so, and where the gradient went."""
    from conftest import run_scenario

    from gradcheck.scenarios._featherstone import newton_missing

    if newton_missing():
        pytest.skip(newton_missing())
    result, _ = run_scenario("cartpole", fault="state-in-tape", passes=2, steps="8")
    assert result.error is None, result.error
    breaks = {f.subject: f.evidence["break"] for f in result.findings if f.check == "missing-gradient"}
    assert breaks["states[0].joint_q.grad"]["cause"] == "replaced"
    (joint_q,) = [f for f in result.findings if f.subject == "states[0].joint_q.grad"]
    assert "recorded copy of model.joint_q" in joint_q.message
    assert breaks["controls[0].joint_f.grad"]["cause"] == "replaced"


def test_a_launch_whose_derivative_is_zero_there_is_named_without_blaming_a_builtin(warp_cpu):
    """A clamp that saturates everywhere: every link is on the tape and has a backward, and the launch alone, on
    private buffers, passes the param nothing: named as where the gradient stops (no builtin blamed)."""
    import gradcheck

    wp = warp_cpu

    @wp.kernel
    def clamp_low(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = wp.max(x[i], 0.0)

    @wp.kernel
    def squares(z: wp.array(dtype=float), loss: wp.array(dtype=float)):
        i = wp.tid()
        wp.atomic_add(loss, 0, z[i] * z[i] + 1.0)

    x = wp.array(-np.ones(4, dtype=np.float32), requires_grad=True)
    y = wp.zeros(4, dtype=float, requires_grad=True)
    with gradcheck.audit(params={"x": x}) as audit:
        for _ in range(2):
            loss = wp.zeros(1, dtype=float, requires_grad=True)
            tape = wp.Tape()
            with tape:
                wp.launch(clamp_low, 4, inputs=[x], outputs=[y])
                wp.launch(squares, 4, inputs=[y], outputs=[loss])
            tape.backward(loss)
            tape.zero()
    (missing,) = [f for f in audit.result.findings if f.check == "missing-gradient"]
    assert missing.evidence["break"]["cause"] == "zero-adjoint"
    assert "clamp_low (test_chain_break_probe.py:" in missing.evidence["break"]["launch"]
    assert x.grad.numpy().tolist() == [0.0] * 4  # the single-launch test wrote nothing of the program's


def test_a_param_read_through_a_view_by_a_kernel_without_backward_is_that_break_and_a_print_is_no_cause():
    result = audited(EXEC / "view_param_no_backward.py")
    (missing,) = [f for f in result.findings if f.check == "missing-gradient"]
    assert missing.evidence["break"]["cause"] == "no-backward"
    assert "fwd (view_param_no_backward.py:" in missing.message and "numpy()" not in missing.message
