"""warp-nn MLP with RMS and group norm: ``Linear(20, 32) -> RMSNorm(32) -> Swish -> Linear(32, 16) ->
GroupNorm(4, 16) -> Linear(16, 2)``, mean squared error, Adam.

Program under test: warp-nn 0.4.1's ``RMSNorm`` and ``GroupNorm`` (normalisation kernels that loop over run-time
ranges), ``Swish`` and ``Linear`` (tile GEMM over run-time K-chunks). The driver (ours) only chooses sizes: batch 8,
3 steps.
"""

import numpy as np
import warp as wp
from _wnn_common import mse, setup, steps_from_argv, train

setup()
import warp_nn.nn as nn  # noqa: E402

BATCH, FEATURES = 8, 20


def build():
    model = nn.Sequential(
        nn.Linear(FEATURES, 32),
        nn.RMSNorm(32),
        nn.Swish(),
        nn.Linear(32, 16),
        nn.GroupNorm(4, 16),
        nn.Linear(16, 2),
    )
    rng = np.random.default_rng(6)
    x = wp.array(rng.normal(size=(BATCH, FEATURES)).astype(np.float32), dtype=float)
    y = wp.array(rng.normal(size=(BATCH, 2)).astype(np.float32), dtype=float)
    return model, lambda: mse(model(x), y)


if __name__ == "__main__":
    model, loss_fn = build()
    train(model, loss_fn, steps_from_argv(3))
