"""A fit whose target buffer changes outside kernels after the loss launch read it, still inside the recorded
forward, picked with ``--change``: backward then replays the loss launch with values the forward never used.

- ``none``: the target is refreshed at the start of each forward, before any launch reads it (correct);
- ``assign``: ``target.assign(next_batch)`` after the loss launch;
- ``fill``: ``target.fill_(0.5)`` after the loss launch;
- ``numpy-view``: a write through the CPU view, ``target.numpy()[:] = ...`` (on CUDA: an ``assign``, the view is
  a copy there);
- ``copy``: ``wp.copy(target, next_batch)`` (the batch has no gradient: Warp does not record the copy).
"""

import argparse

import numpy as np
import warp as wp

parser = argparse.ArgumentParser()
parser.add_argument("--change", default="none", choices=["none", "assign", "fill", "numpy-view", "copy"])
parser.add_argument("--iters", type=int, default=3)
options = parser.parse_args()


@wp.kernel
def predict(w: wp.array(dtype=float), x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = w[0] * x[i]


@wp.kernel
def squared_error(y: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = y[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd(param: wp.array(dtype=float), grad: wp.array(dtype=float), rate: float):
    i = wp.tid()
    param[i] = param[i] - rate * grad[i]


n = 8
x = wp.array(np.linspace(0.0, 1.0, n, dtype=np.float32))
batches = [np.linspace(0.0, 2.0, n, dtype=np.float32), np.linspace(0.5, 2.5, n, dtype=np.float32)]
target = wp.array(batches[0])
w = wp.array([1.0], dtype=float, requires_grad=True)
y = wp.zeros(n, dtype=float, requires_grad=True)
for it in range(options.iters):
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        if options.change == "none":
            target.assign(batches[it % 2])
        wp.launch(predict, dim=n, inputs=[w, x], outputs=[y])
        wp.launch(squared_error, dim=n, inputs=[y, target], outputs=[loss])
        following = batches[(it + 1) % 2]
        if options.change == "assign":
            target.assign(following)
        elif options.change == "fill":
            target.fill_(0.5)
        elif options.change == "numpy-view":
            if target.device.is_cpu:
                target.numpy()[:] = following
            else:
                target.assign(following)
        elif options.change == "copy":
            wp.copy(target, wp.array(following, device=target.device))
    tape.backward(loss)
    wp.launch(sgd, dim=1, inputs=[w, w.grad, 0.05])
    print(f"iter {it}: loss {loss.numpy()[0]:.4f} w {w.numpy()[0]:.4f}")
    tape.zero()
