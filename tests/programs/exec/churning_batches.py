"""A training loop that makes a new input array (requiring grad) every step and turns NaN late: what a long run
looks like to gradcheck's bounded records (tests/test_long_runs.py).

    python churning_batches.py [--iterations N] [--nan-at K]
"""

import argparse
import gc
import weakref

import numpy as np
import warp as wp


@wp.kernel
def fit(x: wp.array(dtype=float), batch: wp.array(dtype=float), s: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - batch[i]
    wp.atomic_add(loss, 0, wp.sqrt(d * d + s))


@wp.kernel
def sgd(x: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * g[i]


parser = argparse.ArgumentParser()
parser.add_argument("--iterations", type=int, default=300)
parser.add_argument("--nan-at", type=int, default=0)
options = parser.parse_args()
rng = np.random.default_rng(0)
x = wp.array(rng.standard_normal(8), dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
first_batch = None
for iteration in range(1, options.iterations + 1):
    batch = wp.array(rng.standard_normal(8), dtype=float, requires_grad=True)  # a fresh leaf every step
    if first_batch is None:
        first_batch = weakref.ref(batch)
    smoothing = 0.0 if iteration == options.nan_at else 1e-3
    if smoothing == 0.0:
        batch.assign(x.numpy())  # lands exactly on x: sqrt'(0)
    loss.zero_()
    tape = wp.Tape()
    with tape:
        wp.launch(fit, dim=8, inputs=[x, batch, smoothing], outputs=[loss])
    tape.backward(loss)
    if smoothing != 0.0:
        wp.launch(sgd, dim=8, inputs=[x, x.grad, 0.01])
    tape.zero()
del batch, tape
gc.collect()
print("first batch freed:", first_batch() is None)
