"""A small training script (fit a gain and an offset so that gain*x + offset matches a target) whose gradient chain
from ``offset`` to the loss is broken in one of the ways Warp users meet, picked with ``--cause``; run unmodified
under ``gradcheck exec``. ``offset`` is updated by an SGD kernel from its gradient, so gradcheck knows it is a
parameter; ``gain``'s chain is intact in every variant.

- ``clean``: every launch under the tape, every array with a gradient.
- ``no-backward``: the kernel that adds the offset is compiled with ``enable_backward=False``.
- ``no-grad-intermediate``: the array between the offset and the loss is allocated with ``requires_grad=False``.
- ``host-round-trip``: the shifted values go through ``.numpy()`` and come back as a new ``wp.array``.
- ``before-tape``: the offset is added by a launch made before ``with tape:``.
- ``unrecorded-copy``: the shifted values are copied with ``wp.copy`` into an array without a gradient (Warp
  records a copy only when both arrays have one).
- ``never-read``: the loss kernel reads the un-shifted values; no launch reads ``offset`` at all.
- ``no-adjoint-builtin``: the offset goes through ``wp.floor`` (a builtin Warp gives no adjoint).

Every variant prints the loss and the parameters, as a training script does, and exits 0.
"""

import argparse

import numpy as np
import warp as wp

CAUSES = [
    "clean",
    "no-backward",
    "no-grad-intermediate",
    "host-round-trip",
    "before-tape",
    "unrecorded-copy",
    "never-read",
    "no-adjoint-builtin",
]
parser = argparse.ArgumentParser()
parser.add_argument("--cause", default="clean", choices=CAUSES)
parser.add_argument("--iters", type=int, default=3)
options = parser.parse_args()


@wp.kernel
def scale(x: wp.array(dtype=float), gain: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = gain[0] * x[i]


@wp.kernel
def shift(y: wp.array(dtype=float), offset: wp.array(dtype=float), z: wp.array(dtype=float)):
    i = wp.tid()
    z[i] = y[i] + offset[0]


@wp.kernel(enable_backward=False)
def shift_forward_only(y: wp.array(dtype=float), offset: wp.array(dtype=float), z: wp.array(dtype=float)):
    i = wp.tid()
    z[i] = y[i] + offset[0]


@wp.kernel
def shift_floored(y: wp.array(dtype=float), offset: wp.array(dtype=float), z: wp.array(dtype=float)):
    i = wp.tid()
    z[i] = y[i] + wp.floor(offset[0] * 4.0) * 0.25


@wp.kernel
def squared_error(z: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = z[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd(param: wp.array(dtype=float), grad: wp.array(dtype=float), rate: float):
    i = wp.tid()
    param[i] = param[i] - rate * grad[i]


n = 16
x = wp.array(np.linspace(-1.0, 1.0, n, dtype=np.float32))
target = wp.array(1.5 * np.linspace(-1.0, 1.0, n, dtype=np.float32) + 0.3)
gain = wp.array([1.0], dtype=float, requires_grad=True)
offset = wp.array([0.1], dtype=float, requires_grad=True)
cause = options.cause

for it in range(options.iters):
    y = wp.zeros(n, dtype=float, requires_grad=True)
    z = wp.zeros(n, dtype=float, requires_grad=cause != "no-grad-intermediate")
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    if cause == "before-tape":
        # the offset is added before recording starts: the tape never sees the launch that read it
        wp.launch(scale, dim=n, inputs=[x, gain], outputs=[y])
        wp.launch(shift, dim=n, inputs=[y, offset], outputs=[z])
    tape = wp.Tape()
    with tape:
        if cause != "before-tape":
            wp.launch(scale, dim=n, inputs=[x, gain], outputs=[y])
        if cause in ("clean", "no-grad-intermediate"):
            wp.launch(shift, dim=n, inputs=[y, offset], outputs=[z])
        elif cause == "no-backward":
            wp.launch(shift_forward_only, dim=n, inputs=[y, offset], outputs=[z])
        elif cause == "no-adjoint-builtin":
            wp.launch(shift_floored, dim=n, inputs=[y, offset], outputs=[z])
        elif cause == "host-round-trip":
            shifted = wp.zeros(n, dtype=float, requires_grad=True)
            wp.launch(shift, dim=n, inputs=[y, offset], outputs=[shifted])
            z = wp.array(shifted.numpy(), dtype=float, requires_grad=True)
        elif cause == "unrecorded-copy":
            shifted = wp.zeros(n, dtype=float, requires_grad=True)
            wp.launch(shift, dim=n, inputs=[y, offset], outputs=[shifted])
            plain = wp.zeros(n, dtype=float)
            wp.copy(plain, shifted)
            z = plain
        elif cause == "never-read":
            z = y
        wp.launch(squared_error, dim=n, inputs=[z, target], outputs=[loss])
    tape.backward(loss)
    wp.launch(sgd, dim=1, inputs=[gain, gain.grad, 0.01])
    wp.launch(sgd, dim=1, inputs=[offset, offset.grad, 0.01])
    print(f"iter {it}: loss {loss.numpy()[0]:.4f} gain {gain.numpy()[0]:.4f} offset {offset.numpy()[0]:.4f}")
    tape.zero()
