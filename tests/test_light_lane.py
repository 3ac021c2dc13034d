"""The backwards the cadence skips (gradcheck.observe.cadence): the lane that takes most of them straight through, and
the NaN/Inf sentinel that still reads every param's gradient on each of them."""

from __future__ import annotations

import numpy as np
import warp as wp

import gradcheck
from gradcheck.observe.cadence import Sentinel
from gradcheck.observe.config import Cadence


@wp.kernel
def _poisoned_square(x: wp.array(dtype=float), poison: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i] * poison[0])


@wp.kernel
def _descend(x: wp.array(dtype=float), grad: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = x[i] - 0.01 * grad[i]


def _train(steps: int, nan_at: int | None = None) -> tuple:
    """A correct fit loop whose poison turns NaN at backward ``nan_at`` (one backward only, then 1 again)."""
    x = wp.array(np.linspace(0.1, 1.0, 64, dtype=np.float32), requires_grad=True, device="cpu")
    poison = wp.ones(1, dtype=float, device="cpu")
    lanes = []
    with gradcheck.audit() as audit:
        window = audit._audit.observer.window
        for step in range(1, steps + 1):
            poison.fill_(float("nan") if step == nan_at else 1.0)
            loss = wp.zeros(1, dtype=float, requires_grad=True, device="cpu")
            tape = wp.Tape()
            with tape:
                wp.launch(_poisoned_square, dim=64, inputs=[x, poison], outputs=[loss], device="cpu")
            lanes.append(window.lane)  # whether this backward takes the lane
            tape.backward(loss)
            if step != nan_at:
                wp.launch(_descend, dim=64, inputs=[x, x.grad], device="cpu")
            tape.zero()
    return audit, lanes


def test_most_skipped_backwards_take_the_lane_and_every_audited_one_does_not():
    cadence = Cadence()
    steps = cadence.first + 2 * cadence.every + 4
    audit, lanes = _train(steps)
    assert not audit.findings
    for number, lane in enumerate(lanes, start=1):
        if cadence.full(number):
            assert not lane, number  # an audited backward never takes the lane
    skipped = [lane for number, lane in enumerate(lanes, start=1) if not cadence.full(number)]
    assert sum(skipped) >= len(skipped) - 4  # all but the first after each audited window (which leaves it)


def test_a_nan_on_a_backward_the_lane_takes_is_reported_at_that_backward():
    cadence = Cadence()
    nan_at = cadence.first + cadence.every // 2  # between two audited pairs
    audit, lanes = _train(cadence.first + cadence.every + 8, nan_at=nan_at)
    assert lanes[nan_at - 1]  # the lane took it
    (nan,) = [f for f in audit.findings if f.check == "nonfinite" and f.severity.label == "error"]
    assert nan.subject == "x.grad" and nan.evidence["first_pass"] == nan_at


def _grad(values) -> wp.array:
    return wp.array(np.asarray(values, dtype=np.float32), dtype=float, device="cpu")


def test_the_sentinel_answers_as_an_elementwise_isfinite_would_and_warns_nothing(recwarn):
    """Finite values whose sum would overflow are finite, a NaN or an Inf anywhere (or +Inf and -Inf together) is
    not, and nothing is said on the program's stderr meanwhile (a NumPy sum would warn of the overflow)."""
    huge = np.full(1024, 3e38, dtype=np.float32)  # a float32 sum of these overflows
    cases = {
        "zeros": np.zeros(1024, dtype=np.float32),
        "huge": huge,
        "huge, one NaN": np.where(np.arange(1024) == 7, np.float32("nan"), huge),
        "+Inf and -Inf": np.array([np.inf, -np.inf, 1.0], dtype=np.float32),
        "one -Inf": np.array([0.0, -np.inf], dtype=np.float32),
    }
    for name, values in cases.items():
        grad = _grad(values)
        assert Sentinel().finite([grad, None]) == bool(np.isfinite(values.astype(np.float32)).all()), name
    # the views are kept while the gradients stay the same arrays, and made again when one is replaced
    sentinel, first, second = Sentinel(), _grad([1.0, 2.0]), _grad([1.0, np.nan])
    assert sentinel.finite([first]) and not sentinel.finite([second]) and sentinel.finite([first])
    assert not recwarn.list
