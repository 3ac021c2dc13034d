"""warp-nn CNN classifier: ``Conv2D(3, 6, 3) -> MaxPool2D(2) -> Flatten -> ReLU -> Linear(150, 5) -> LogSoftmax``,
negative log-likelihood of random labels, Adam.

Program under test: warp-nn 0.4.1's ``Conv2D`` (its kernel loops over the input channels of each group, a run-time
count), ``MaxPool2D`` (loops over each pooling window), ``Linear`` (tile GEMM over ``150 / 16`` run-time K-chunks)
and ``LogSoftmax`` (loops over ``input.shape[1]`` classes, read at run time). The driver (ours) only chooses sizes:
batch 8 of 3x12x12 images, 5 classes, 3 steps
(ReLU after Flatten: warp-nn's activations take 1-D to 3-D arrays).
"""

import numpy as np
import warp as wp
from _wnn_common import nll, setup, steps_from_argv, train

setup()
import warp_nn.nn as nn  # noqa: E402

BATCH, CLASSES = 8, 5


def build():
    model = nn.Sequential(
        nn.Conv2D(3, 6, 3),
        nn.MaxPool2D(2),
        nn.Flatten(),
        nn.ReLU(),
        nn.Linear(6 * 5 * 5, CLASSES),
        nn.LogSoftmax(dim=1),
    )
    rng = np.random.default_rng(3)
    x = wp.array(rng.normal(size=(BATCH, 3, 12, 12)).astype(np.float32), dtype=float)
    labels = wp.array(rng.integers(0, CLASSES, BATCH).astype(np.int32), dtype=int)
    return model, lambda: nll(model(x), labels)


if __name__ == "__main__":
    model, loss_fn = build()
    train(model, loss_fn, steps_from_argv(3))
