"""A long fit loop (a fresh loss array each step, one SGD launch, ``tape.zero()``), for the cadence that audits a
long program's backwards in sampled pairs.

- ``--forget-zero-from N``: from backward N on, ``tape.zero()`` is forgotten: the gradient accumulates. Found at
  the first audited pair at or after N (every backward with ``--audit-every 1``).
"""

import argparse

import numpy as np
import warp as wp

parser = argparse.ArgumentParser()
parser.add_argument("--iters", type=int, default=400)
parser.add_argument("--forget-zero-from", type=int, default=0)
options = parser.parse_args()


@wp.kernel
def squared_error(x: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd(x: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * grad[i]


n = 32
x = wp.array(np.linspace(0.0, 1.0, n, dtype=np.float32), dtype=float, requires_grad=True)
target = wp.array(np.full(n, 0.5, dtype=np.float32), dtype=float)
for step in range(1, options.iters + 1):
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(squared_error, dim=n, inputs=[x, target], outputs=[loss])
    tape.backward(loss)
    wp.launch(sgd, dim=n, inputs=[x, x.grad, 1.0e-4])
    if not (options.forget_zero_from and step >= options.forget_zero_from):
        tape.zero()
print("loss", float(loss.numpy()[0]))
