"""Shared plumbing of the warp-nn drivers: the CPU device, a seeded random stream, the loss kernels and the training
loop that warp-nn's own examples use (one ``wp.Tape`` per step, ``tape.backward(loss)``, ``warp_nn`` Adam, then
``tape.zero()``).

warp-nn (https://github.com/NVIDIA/warp-nn, Apache-2.0, maintained by the Isaac Sim team, not Warp's core team) is
pinned in the Makefile's ``THIRDPARTY_PACKAGES`` and installed into ``.venv-thirdparty``; nothing of it is copied
here. The model is warp-nn's code; the loss kernels and the loop are the driver's, after warp-nn's documentation.
Each driver exposes ``build()`` -> ``(model, loss_fn)`` where ``loss_fn()`` runs the forward and returns the
1-element loss array, so that fd_checks/ can differentiate the very same program by central differences.
The drivers print each step's loss and the trained parameters' sums: a gradient, optimizer state or random
stream that gradcheck disturbed would change them.
"""

from __future__ import annotations

import sys

import numpy as np
import warp as wp

SEED = 7


def setup() -> None:
    """Warp on the CPU and the seeded numpy stream warp-nn's initialisers draw from."""
    wp.init()
    wp.set_device("cpu")
    np.random.seed(SEED)


@wp.kernel
def mse_loss(pred: wp.array2d[float], target: wp.array2d[float], scale: float, loss: wp.array[float]):
    i, j = wp.tid()
    d = pred[i, j] - target[i, j]
    wp.atomic_add(loss, 0, d * d * scale)


@wp.kernel
def nll_loss(log_probs: wp.array2d[float], labels: wp.array[int], scale: float, loss: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(loss, 0, -log_probs[i, labels[i]] * scale)


@wp.kernel
def soft_cross_entropy(probs: wp.array2d[float], target: wp.array2d[float], scale: float, loss: wp.array[float]):
    i, j = wp.tid()
    wp.atomic_add(loss, 0, -target[i, j] * wp.log(probs[i, j] + 1.0e-6) * scale)


def mse(pred: wp.array, target: wp.array) -> wp.array:
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    pred2 = pred.reshape((pred.shape[0], -1))
    wp.launch(mse_loss, dim=pred2.shape, inputs=[pred2, target, 1.0 / pred2.size, loss])
    return loss


def nll(log_probs: wp.array, labels: wp.array) -> wp.array:
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    wp.launch(nll_loss, dim=log_probs.shape[0], inputs=[log_probs, labels, 1.0 / log_probs.shape[0], loss])
    return loss


def soft_ce(probs: wp.array, target: wp.array) -> wp.array:
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    wp.launch(soft_cross_entropy, dim=probs.shape, inputs=[probs, target, 1.0 / probs.shape[0], loss])
    return loss


def steps_from_argv(default: int) -> int:
    """``--steps N`` (the only argument a driver takes)."""
    if "--steps" in sys.argv:
        return int(sys.argv[sys.argv.index("--steps") + 1])
    return default


def train(model, loss_fn, steps: int, lr: float = 1.0e-2) -> None:
    from warp_nn.optimizers import Adam

    optimizer = Adam(model.parameters(), lr=lr, device="cpu")
    for step in range(steps):
        tape = wp.Tape()
        with tape:
            loss = loss_fn()
        tape.backward(loss)
        optimizer.step()
        tape.zero()
        print(f"step {step}: loss {loss.numpy()[0]:.6g}")
    for index, parameter in enumerate(model.parameters()):
        values = parameter.numpy().astype(np.float64)
        print(f"parameter {index} {tuple(parameter.shape)}: sum {values.sum():.6g}, |sum| {np.abs(values).sum():.6g}")


def sequence_regression(cell, features: int = 20, hidden: int = 24, batch: int = 4, steps: int = 6, seed: int = 2):
    """(model, loss) of the recurrent drivers: a 2-layer ``cell(features, hidden)`` over ``steps`` time steps, its
    whole output sequence fitted to a target (the same data for LSTM, GRU and RNN)."""
    model = cell(features, hidden, num_layers=2)
    rng = np.random.default_rng(seed)
    x = wp.array(rng.uniform(-1.0, 1.0, (batch, steps, features)).astype(np.float32), dtype=float)
    y = wp.array(0.5 * np.tanh(rng.normal(size=(batch, steps * hidden))).astype(np.float32), dtype=float)
    return model, lambda: mse(model(x)[0], y)
