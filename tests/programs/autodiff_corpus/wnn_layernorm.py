"""warp-nn MLP with layer norm: ``Linear(24, 32) -> LayerNorm(32) -> GELU -> Linear(32, 6) -> Softmax``, soft
cross-entropy against random distributions, Adam.

Program under test: warp-nn 0.4.1's ``LayerNorm`` (its mean and variance kernels loop over ``range(start, end)``, a
run-time range), ``GELU``, ``Linear`` (tile GEMM over run-time K-chunks) and ``Softmax`` (loops over the classes
read at run time). The driver (ours) only chooses sizes: batch 8, 3 steps.
"""

import numpy as np
import warp as wp
from _wnn_common import setup, soft_ce, steps_from_argv, train

setup()
import warp_nn.nn as nn  # noqa: E402

BATCH, FEATURES, CLASSES = 8, 24, 6


def build():
    model = nn.Sequential(
        nn.Linear(FEATURES, 32), nn.LayerNorm(32), nn.GELU(), nn.Linear(32, CLASSES), nn.Softmax(dim=1)
    )
    rng = np.random.default_rng(4)
    x = wp.array(rng.normal(size=(BATCH, FEATURES)).astype(np.float32), dtype=float)
    target = rng.uniform(size=(BATCH, CLASSES))
    target = wp.array((target / target.sum(axis=1, keepdims=True)).astype(np.float32), dtype=float)
    return model, lambda: soft_ce(model(x), target)


if __name__ == "__main__":
    model, loss_fn = build()
    train(model, loss_fn, steps_from_argv(3))
