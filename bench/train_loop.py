"""A small, correct Warp training loop for the long-run benchmark (bench/long_training.py).

    python bench/train_loop.py --iterations N

y = 2 x + b, loss = sum sqrt((y - t)^2 + s), one SGD step per iteration, tape.zero() after it: every iteration
runs the same launches on the same arrays, so any growth in time or memory per backward is the observer's.
"""

import argparse

import warp as wp

wp.config.log_level = wp.LOG_WARNING


@wp.kernel
def predict(x: wp.array(dtype=float), b: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i] + b[i]


@wp.kernel
def distance(y: wp.array(dtype=float), t: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = y[i] - t[i]
    wp.atomic_add(loss, 0, wp.sqrt(d * d + 1e-3))


@wp.kernel
def sgd(x: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * g[i]


parser = argparse.ArgumentParser()
parser.add_argument("--iterations", type=int, default=1000)
options = parser.parse_args()
n = 64
x = wp.array([0.01 * i for i in range(n)], dtype=float, requires_grad=True)
b = wp.zeros(n, dtype=float, requires_grad=True)
y = wp.zeros(n, dtype=float, requires_grad=True)
t = wp.array([0.5] * n, dtype=float)
loss = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
for _ in range(options.iterations):
    loss.zero_()
    with tape:
        wp.launch(predict, dim=n, inputs=[x, b], outputs=[y])
        wp.launch(distance, dim=n, inputs=[y, t], outputs=[loss])
    tape.backward(loss)
    wp.launch(sgd, dim=n, inputs=[x, x.grad, 1e-3])
    tape.zero()
    tape.reset()
print("loss", float(loss.numpy()[0]))
