"""Gradients read through the tape's own API (``tape.get_adjoint``, ``tape.gradients``), as Warp's own tests and
examples read them: a struct's adjoint is a fresh struct Warp builds from the live fields' ``.grad`` on each call.

- ``--mistake none``: one SGD step from the adjoints read that way, then ``tape.zero()``: nothing to find;
- ``--mistake no-zero``: the zero step is forgotten: the struct field's gradient accumulates (found on it, as on any
  other gradient).
"""

import argparse

import numpy as np
import warp as wp

parser = argparse.ArgumentParser()
parser.add_argument("--mistake", choices=["none", "no-zero"], default="none")
options = parser.parse_args()


@wp.struct
class Params:
    w: wp.array(dtype=float)
    scale: float


@wp.kernel
def model(p: Params, x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, p.scale * p.w[i] * p.w[i] * x[i])


@wp.kernel
def step(w: wp.array(dtype=float), g: wp.array(dtype=float)):
    i = wp.tid()
    w[i] = w[i] - 0.01 * g[i]


p = Params()
p.w = wp.array(np.ones(8, dtype=np.float32), dtype=float, requires_grad=True)
p.scale = 2.0
x = wp.array(np.arange(8, dtype=np.float32), dtype=float, requires_grad=True)
for iteration in range(4):
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(model, 8, inputs=[p, x], outputs=[loss])
    tape.backward(loss)
    adjoint = tape.get_adjoint(p)  # a struct whose w is p.w.grad
    by_dict = tape.gradients[x]
    print(iteration, float(adjoint.w.numpy().sum()), float(by_dict.numpy().sum()))
    wp.launch(step, 8, inputs=[p.w, adjoint.w])
    if options.mistake == "none":
        tape.zero()
