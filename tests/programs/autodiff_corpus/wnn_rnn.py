"""warp-nn RNN sequence regression: a 2-layer ``RNN(20, 24)`` over 6 steps, its whole output sequence fitted to a
target by Adam.

Program under test: warp-nn 0.4.1's ``RNN`` (one tile kernel per layer and time step; each gate is a tile GEMM that
loops over ``count = in_features / 16`` K-chunks, a trip count read at run time: 2 chunks for the 20 inputs of layer
1, the last one partial, 2 for the 24 hidden features) and ``Adam``. The driver (ours, after warp-nn's
documentation) only chooses sizes: batch 4, 6 time steps, 2 layers, 3 optimizer steps.
"""

from _wnn_common import sequence_regression, setup, steps_from_argv, train

setup()
import warp_nn.nn as nn  # noqa: E402


def build():
    return sequence_regression(nn.RNN)


if __name__ == "__main__":
    model, loss_fn = build()
    train(model, loss_fn, steps_from_argv(3))
