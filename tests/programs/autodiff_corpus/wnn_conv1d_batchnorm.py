"""warp-nn 1-D CNN with batch norm: ``Conv1D(4, 8, 3) -> BatchNorm(8) -> ReLU -> AvgPool1D(2) -> Flatten ->
Linear(56, 3)``, mean squared error, Adam.

Program under test: warp-nn 0.4.1's ``Conv1D`` (loops over the input channels of each group at run time),
``BatchNorm`` in training mode (batch statistics: normalisation loops over run-time ranges; running statistics
updated as buffers), ``AvgPool1D`` and ``Linear`` (tile GEMM over run-time K-chunks). The driver (ours) only chooses
sizes: batch 8 of 4x16 signals, 3 steps.
"""

import numpy as np
import warp as wp
from _wnn_common import mse, setup, steps_from_argv, train

setup()
import warp_nn.nn as nn  # noqa: E402

BATCH = 8


def build():
    model = nn.Sequential(
        nn.Conv1D(4, 8, 3), nn.BatchNorm(8), nn.ReLU(), nn.AvgPool1D(2), nn.Flatten(), nn.Linear(8 * 7, 3)
    )
    rng = np.random.default_rng(5)
    x = wp.array(rng.normal(size=(BATCH, 4, 16)).astype(np.float32), dtype=float)
    y = wp.array(rng.normal(size=(BATCH, 3)).astype(np.float32), dtype=float)
    return model, lambda: mse(model(x), y)


if __name__ == "__main__":
    model, loss_fn = build()
    train(model, loss_fn, steps_from_argv(3))
