"""warp-nn MLP regression: ``Sequential(Linear(40, 32), Tanh(), Linear(32, 1))`` fitted to a smooth target by Adam.

Program under test: warp-nn 0.4.1's ``Linear`` (a tile kernel whose GEMM loops over ``count = in_features / 16``
K-chunks, a trip count read at run time from the weight's shape: 3 chunks here, the last one partial), ``Tanh`` and
``Adam``. The driver (ours, after warp-nn's documentation) only chooses sizes: batch 16, 40 inputs, 3 steps.
"""

import numpy as np
import warp as wp
from _wnn_common import mse, setup, steps_from_argv, train

setup()
import warp_nn.nn as nn  # noqa: E402

BATCH, FEATURES = 16, 40


def build():
    model = nn.Sequential(nn.Linear(FEATURES, 32), nn.Tanh(), nn.Linear(32, 1))
    rng = np.random.default_rng(1)
    x_np = rng.uniform(-1.0, 1.0, (BATCH, FEATURES)).astype(np.float32)
    x = wp.array(x_np, dtype=float)
    y = wp.array(np.sin(x_np.sum(axis=1, keepdims=True)).astype(np.float32), dtype=float)
    return model, lambda: mse(model(x), y)


if __name__ == "__main__":
    model, loss_fn = build()
    train(model, loss_fn, steps_from_argv(3))
