"""warp-nn GRU sequence regression: a 2-layer ``GRU(20, 24)`` over 6 steps, its whole output sequence fitted to a
target by Adam.

Program under test: warp-nn 0.4.1's ``GRU`` (one tile kernel per layer and time step; each gate is a tile GEMM that
loops over ``count = in_features / 16`` K-chunks, a trip count read at run time: 2 chunks for the 20 inputs of layer
1, the last one partial, 2 for the 24 hidden features) and ``Adam``. The driver (ours, after warp-nn's
documentation) only chooses sizes: batch 4, 6 time steps, 2 layers, 3 optimizer steps.
"""

import numpy as np
import warp as wp
from _wnn_common import mse, setup, steps_from_argv, train

setup()
import warp_nn.nn as nn  # noqa: E402

BATCH, STEPS, FEATURES, HIDDEN = 4, 6, 20, 24


def build():
    model = nn.GRU(FEATURES, HIDDEN, num_layers=2)
    rng = np.random.default_rng(2)
    x_np = rng.uniform(-1.0, 1.0, (BATCH, STEPS, FEATURES)).astype(np.float32)
    x = wp.array(x_np, dtype=float)
    y = wp.array(0.5 * np.tanh(rng.normal(size=(BATCH, STEPS * HIDDEN))).astype(np.float32), dtype=float)
    return model, lambda: mse(model(x)[0], y)


if __name__ == "__main__":
    model, loss_fn = build()
    train(model, loss_fn, steps_from_argv(3))
