"""A Warp fit loop that captures its forward and backward in a graph and replays it, as Newton's diffsim examples
do on a GPU (gradcheck exec tests; CUDA, and CPU where Warp captures graphs there).

    python captured_training.py [--capture both|forward] [--mistake none|no-zero] [--iterations N] [--device D]

y = 2 x + b, loss = sum (y - t)^2; one SGD step on x per iteration, outside the graph. ``--capture both`` records
forward and backward into one graph, replayed once per iteration: each replay is a backward Python never sees.
``--capture forward`` records only the forward; the backward runs from Python after each replay, so the replays
are no backwards of their own. ``--mistake no-zero`` leaves out ``tape.zero()``: the replayed backward adds onto
the last iteration's gradients. ``--mistake shared-scratch`` adds a second term through one scratch buffer used
twice: the first term's reader sees the second term's values when backward runs (a write-after-read).
``--mistake stale-read`` adds a term that reads a control before the forward writes it (as Newton's drone cost
reads the next control): the forward used last iteration's control, its backward sees this one's. ``--warmup N``:
N plain training iterations (no capture, no mistake) first, so the capture comes between audited windows.
"""

import argparse

import numpy as np
import warp as wp


@wp.kernel
def double(x: wp.array(dtype=float), b: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i] + b[i]


@wp.kernel
def squared_distance(y: wp.array(dtype=float), t: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = y[i] - t[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def scaled_square(x: wp.array(dtype=float), k: float, scratch: wp.array(dtype=float)):
    i = wp.tid()
    scratch[i] = k * x[i] * x[i]


@wp.kernel
def weigh(scratch: wp.array(dtype=float), x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, 0.01 * scratch[i] * x[i])


@wp.kernel
def next_control_cost(control: wp.array(dtype=float), x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, 0.01 * control[1] * x[0])


@wp.kernel
def set_control(x: wp.array(dtype=float), control: wp.array(dtype=float)):
    i = wp.tid()
    control[i] = 0.5 * x[i]


@wp.kernel
def sgd(x: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * g[i]


parser = argparse.ArgumentParser()
parser.add_argument("--capture", default="both", choices=["both", "forward"])
parser.add_argument("--mistake", default="none", choices=["none", "no-zero", "shared-scratch", "stale-read"])
parser.add_argument("--iterations", type=int, default=5)
parser.add_argument("--device", default=None)
parser.add_argument("--warmup", type=int, default=0, help="plain training iterations (no mistake) before the capture")
options = parser.parse_args()

with wp.ScopedDevice(options.device):
    x = wp.array([1.0, 2.0, 3.0, 4.0], dtype=float, requires_grad=True)
    b = wp.array([0.1, 0.0, -0.1, 0.2], dtype=float)
    y = wp.zeros(4, dtype=float, requires_grad=True)
    target = wp.array([0.5, -0.5, 1.5, 0.0], dtype=float)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    scratch = wp.zeros(4, dtype=float, requires_grad=True)
    control = wp.zeros(4, dtype=float, requires_grad=True)
    tape = wp.Tape()

    def forward():
        loss.zero_()
        wp.launch(double, dim=4, inputs=[x, b], outputs=[y])
        wp.launch(squared_distance, dim=4, inputs=[y, target], outputs=[loss])
        if options.mistake == "shared-scratch":
            for k in (1.0, 2.0):  # the same scratch for both terms
                wp.launch(scaled_square, dim=4, inputs=[x, k], outputs=[scratch])
                wp.launch(weigh, dim=4, inputs=[scratch, x], outputs=[loss])
        if options.mistake == "stale-read":
            wp.launch(next_control_cost, dim=1, inputs=[control, x], outputs=[loss])
            wp.launch(set_control, dim=4, inputs=[x], outputs=[control])

    for _ in range(options.warmup):  # a plain loop first: under gradcheck exec, the capture comes long after
        plain = wp.Tape()
        with plain:
            loss.zero_()
            wp.launch(double, dim=4, inputs=[x, b], outputs=[y])
            wp.launch(squared_distance, dim=4, inputs=[y, target], outputs=[loss])
        plain.backward(loss)
        wp.launch(sgd, dim=4, inputs=[x, x.grad, 0.05])
        plain.zero()

    # compile before capturing: a graph cannot hold a module load
    wp.load_module(device=wp.get_device())
    with wp.ScopedCapture() as capture:
        with tape:
            forward()
        if options.capture == "both":
            tape.backward(loss)
    graph = capture.graph

    norms = []
    for _ in range(options.iterations):
        wp.capture_launch(graph)
        if options.capture == "forward":
            tape.backward(loss)
        wp.launch(sgd, dim=4, inputs=[x, x.grad, 0.05])
        norms.append(float(np.linalg.norm(x.grad.numpy())))
        if options.mistake != "no-zero":
            tape.zero()
    print("loss", float(loss.numpy()[0]), "gradient norms", [round(n, 4) for n in norms])
