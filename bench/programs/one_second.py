"""E7: a small Warp training loop of about one second under plain python on a 2-core CPU (issue 42's "one-second
program"): a one-hidden-layer network (16 tanh units) fitted to sin(3u) over 256 samples, full-batch, plain SGD.

    python bench/programs/one_second.py [--iters 3500]

Each iteration: the loss zeroed, a tape recording two kernels (the network's forward over the batch, the squared
error into the loss), ``tape.backward(loss)``, one SGD kernel per parameter outside the tape, ``tape.zero()``. Real
kernels with loops and transcendental functions, many backwards: what a short experiment looks like, so `gradcheck
exec`'s ratio on it is what such a user pays. A correct program: any finding on it is a false positive.
"""

import argparse
import math

import warp as wp

wp.config.log_level = wp.LOG_WARNING
wp.config.quiet = True

HIDDEN = 16


@wp.kernel
def network(
    u: wp.array(dtype=float),
    w1: wp.array(dtype=float),
    b1: wp.array(dtype=float),
    w2: wp.array(dtype=float),
    b2: wp.array(dtype=float),
    y: wp.array(dtype=float),
):
    i = wp.tid()
    total = b2[0]
    for h in range(HIDDEN):
        total += w2[h] * wp.tanh(w1[h] * u[i] + b1[h])
    y[i] = total


@wp.kernel
def squared_error(y: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = y[i] - target[i]
    wp.atomic_add(loss, 0, d * d / float(y.shape[0]))


@wp.kernel
def sgd(p: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=3500)
    options = parser.parse_args()
    samples = 256
    inputs = [-1.0 + 2.0 * k / (samples - 1) for k in range(samples)]
    u = wp.array(inputs, dtype=float)
    target = wp.array([math.sin(3.0 * v) for v in inputs], dtype=float)
    w1 = wp.array([0.5 + 0.25 * math.sin(h) for h in range(HIDDEN)], dtype=float, requires_grad=True)
    b1 = wp.array([0.1 * (h - HIDDEN / 2) for h in range(HIDDEN)], dtype=float, requires_grad=True)
    w2 = wp.array([0.3 * math.cos(h) for h in range(HIDDEN)], dtype=float, requires_grad=True)
    b2 = wp.zeros(1, dtype=float, requires_grad=True)
    y = wp.zeros(samples, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    params = (w1, b1, w2, b2)
    tape = wp.Tape()
    for _ in range(options.iters):
        loss.zero_()
        with tape:
            wp.launch(network, dim=samples, inputs=[u, w1, b1, w2, b2], outputs=[y])
            wp.launch(squared_error, dim=samples, inputs=[y, target], outputs=[loss])
        tape.backward(loss)
        for p in params:
            wp.launch(sgd, dim=p.shape[0], inputs=[p, p.grad, 0.05])
        tape.zero()
        tape.reset()
    print("loss", float(loss.numpy()[0]))


if __name__ == "__main__":
    main()
