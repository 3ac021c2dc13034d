"""A rollout whose backward turns NaN at one step: x drifts down by 0.25 a step from 1.75 and each step adds
sqrt(x * x) (|x|) to the loss; at step 8 x is exactly 0 and d sqrt(x^2)/dx = x / |x| is 0/0 in the adjoint, while
the forward loss stays finite. ``--eps`` adds 1e-12 under the root (the clean twin). Trains x0 by SGD for
``--iters`` iterations; prints the loss as a training script does."""

import argparse

import numpy as np
import warp as wp

parser = argparse.ArgumentParser()
parser.add_argument("--eps", action="store_true")
parser.add_argument("--steps", type=int, default=10)
parser.add_argument("--iters", type=int, default=2)
options = parser.parse_args()


@wp.kernel
def drift(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = x[i] - 0.25


@wp.kernel
def magnitude(x: wp.array(dtype=float), eps: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, wp.sqrt(x[i] * x[i] + eps))


@wp.kernel
def sgd(x: wp.array(dtype=float), grad: wp.array(dtype=float), rate: float):
    i = wp.tid()
    x[i] = x[i] - rate * grad[i]


x0 = wp.array(np.array([1.75, 3.0], dtype=np.float32), requires_grad=True)
eps = 1e-12 if options.eps else 0.0
for it in range(options.iters):
    states = [x0] + [wp.zeros(2, dtype=float, requires_grad=True) for _ in range(options.steps)]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for t in range(options.steps):
            wp.launch(magnitude, dim=2, inputs=[states[t], eps], outputs=[loss])
            wp.launch(drift, dim=2, inputs=[states[t]], outputs=[states[t + 1]])
    tape.backward(loss)
    print(f"iter {it}: loss {loss.numpy()[0]:.4f}")
    wp.launch(sgd, dim=2, inputs=[x0, x0.grad, 0.0])  # rate 0: x0 stays where the NaN is
    tape.zero()
