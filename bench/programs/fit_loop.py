"""E3: a 1,024-element fit loop, the issue's program (cost flat in training length).

    python bench/programs/fit_loop.py --iters N

Each iteration: a fresh loss array (``wp.zeros(1, requires_grad=True)``), a new tape, ``with tape:`` a loss kernel over x
(1,024 floats that require grad) against a target, ``tape.backward(loss)``, an SGD kernel ``x -= lr * x.grad``
launched outside the tape, ``tape.zero()``. A correct program: every finding gradcheck reports on it is a false
positive, and any growth in time, memory or report size with N is gradcheck's.
"""

import argparse

import warp as wp

wp.config.log_level = wp.LOG_WARNING
wp.config.quiet = True


@wp.kernel
def squared_error(x: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd(x: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * grad[i]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=1000)
    parser.add_argument("--n", type=int, default=1024)
    options = parser.parse_args()
    n = options.n
    x = wp.array([0.001 * i for i in range(n)], dtype=float, requires_grad=True)
    target = wp.array([0.5] * n, dtype=float)
    loss = None
    for _ in range(options.iters):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(squared_error, dim=n, inputs=[x, target], outputs=[loss])
        tape.backward(loss)
        wp.launch(sgd, dim=n, inputs=[x, x.grad, 1e-3])
        tape.zero()
    print("loss", float(loss.numpy()[0]))


if __name__ == "__main__":
    main()
