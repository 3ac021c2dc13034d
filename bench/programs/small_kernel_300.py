"""E4: 300 backwards of a tiny kernel, as an optimizer's unit test makes them.

    python bench/programs/small_kernel_300.py [--steps 300]

A few small arrays (a weight, a bias, inputs, a target), a new tape each step, one forward kernel and one loss
kernel recorded, ``tape.backward(loss)``, an SGD step from the gradients outside the tape, ``tape.zero()``. The
program's own work is tiny, so this measures gradcheck's constant cost per backward and its start-up.
"""

import argparse

import warp as wp

wp.config.log_level = wp.LOG_WARNING
wp.config.quiet = True


@wp.kernel
def affine(w: wp.array(dtype=float), b: wp.array(dtype=float), u: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = w[i] * u[i] + b[i]


@wp.kernel
def mse(y: wp.array(dtype=float), t: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = y[i] - t[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def step(p: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    options = parser.parse_args()
    n = 8
    w = wp.array([1.0] * n, dtype=float, requires_grad=True)
    b = wp.zeros(n, dtype=float, requires_grad=True)
    u = wp.array([0.1 * i for i in range(n)], dtype=float)
    t = wp.array([0.3] * n, dtype=float)
    y = wp.zeros(n, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    for _ in range(options.steps):
        loss.zero_()
        tape = wp.Tape()
        with tape:
            wp.launch(affine, dim=n, inputs=[w, b, u], outputs=[y])
            wp.launch(mse, dim=n, inputs=[y, t], outputs=[loss])
        tape.backward(loss)
        for p in (w, b):
            wp.launch(step, dim=n, inputs=[p, p.grad, 0.05])
        tape.zero()
    print("loss", float(loss.numpy()[0]))


if __name__ == "__main__":
    main()
