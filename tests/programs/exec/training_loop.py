"""A plain Warp training loop, as an engineer writes it, with the seed mistakes as options (gradcheck exec tests).

    python training_loop.py [--mistake NAME] [--iterations N] [--at K]

y = 2 x + b (x optimised, b a fixed start offset; both require grad), loss = sum sqrt((y - t)^2 + s) over a target
t; one SGD step on x per iteration. Mistakes:
- ``none``: the correct loop (tape.zero() after each step);
- ``new-tape-zero``: a new Tape every iteration and ``tape.zero()`` called on it before the forward, where it
  clears nothing: the gradients of the last iteration are still there when backward adds to them;
- ``params-only-zeroed``: a new tape every iteration and only ``x.grad`` zeroed by hand; ``b.grad`` keeps growing;
- ``target-changed``: the target is moved between the forward and backward (a data loader refilling its buffer);
- ``nan-at``: from iteration K the smoothing s is 0 and the target meets y: sqrt'(0) is infinite, NaN gradient;
- ``optimizer-in-place``: the SGD step scales the gradient buffer in place before the loop logs its norm;
- ``struct-requires-grad-off``: b is passed in a ``wp.struct`` and ``b.requires_grad = False`` is set after the
  struct was assembled: the struct keeps the old gradient pointer, backward writes into a hidden buffer;
- ``aos-freed``: the offsets live in an array of structs, each record holding a one-value array; the records'
  Python objects are dropped and the arrays' gradients released (requires_grad = False): the records still point
  at the freed gradient memory, and backward would write there (gradcheck stops the program first);
- ``accumulate``: deliberate accumulation, two backwards at the same params before one step (not a mistake).
"""

import argparse

import numpy as np
import warp as wp


@wp.kernel
def double(x: wp.array(dtype=float), b: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i] + b[i]


@wp.struct
class Shift:
    b: wp.array(dtype=float)


@wp.kernel
def double_shifted(x: wp.array(dtype=float), shift: Shift, y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i] + shift.b[i]


@wp.kernel
def double_parts(x: wp.array(dtype=float), parts: wp.array(dtype=Shift), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i] + parts[i].b[0]


@wp.kernel
def distance(y: wp.array(dtype=float), t: wp.array(dtype=float), s: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    d = y[i] - t[i]
    wp.atomic_add(loss, 0, wp.sqrt(d * d + s))


@wp.kernel
def sgd(x: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * g[i]


@wp.kernel
def sgd_in_place(x: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    g[i] = lr * g[i]  # the step kept in the gradient buffer
    x[i] = x[i] - g[i]


parser = argparse.ArgumentParser()
parser.add_argument("--mistake", default="none")
parser.add_argument("--iterations", type=int, default=5)
parser.add_argument("--at", type=int, default=3)
options = parser.parse_args()

x = wp.array([1.0, 2.0, 3.0, 4.0], dtype=float, requires_grad=True)
b = wp.array([0.1, 0.0, -0.1, 0.2], dtype=float, requires_grad=True)
y = wp.zeros(4, dtype=float, requires_grad=True)
target = wp.array([0.5, -0.5, 1.5, 0.0], dtype=float)
loss = wp.zeros(1, dtype=float, requires_grad=True)
shift = Shift()
shift.b = b
if options.mistake == "struct-requires-grad-off":
    b.requires_grad = False  # after the struct took b: its mirror keeps pointing at the old gradient
if options.mistake == "aos-freed":
    import gc

    offsets = [wp.array([v], dtype=float, requires_grad=True) for v in b.numpy()]
    records = []
    for offset in offsets:
        record = Shift()
        record.b = offset
        records.append(record)
    parts = wp.array(records, dtype=Shift)
    records = []  # the records keep raw pointers only
    for offset in offsets:
        offset.requires_grad = False  # frees the gradient buffers the records still point at
    gc.collect()
norms = []
tape = wp.Tape()
for iteration in range(1, options.iterations + 1):
    smoothing = 1e-3
    if options.mistake == "nan-at" and iteration >= options.at:
        smoothing = 0.0
        target.assign(2.0 * x.numpy() + b.numpy())  # the target lands exactly on y
    if options.mistake in ("new-tape-zero", "params-only-zeroed"):
        tape = wp.Tape()
        if options.mistake == "new-tape-zero":
            tape.zero()  # a new tape has recorded nothing: this clears nothing
    backwards = 2 if options.mistake == "accumulate" else 1
    for k in range(backwards):
        if k:  # record the forward again on a fresh tape: the params' gradients stay and add up, on purpose
            y.grad.zero_()  # the intermediate's adjoint would otherwise be propagated twice
            tape = wp.Tape()
        loss.zero_()
        with tape:
            if options.mistake == "aos-freed":
                wp.launch(double_parts, dim=4, inputs=[x, parts], outputs=[y])
            elif options.mistake == "struct-requires-grad-off":
                wp.launch(double_shifted, dim=4, inputs=[x, shift], outputs=[y])
            else:
                wp.launch(double, dim=4, inputs=[x, b], outputs=[y])
            wp.launch(distance, dim=4, inputs=[y, target, smoothing], outputs=[loss])
        if options.mistake == "target-changed" and iteration == options.at:
            target.assign(target.numpy() + 1.0)
        tape.backward(loss)
    step = sgd_in_place if options.mistake == "optimizer-in-place" else sgd
    wp.launch(step, dim=4, inputs=[x, x.grad, 0.05])
    norms.append(float(np.linalg.norm(x.grad.numpy())))
    if options.mistake == "params-only-zeroed":
        x.grad.zero_()  # the param's gradient only: b.grad is left to add up
    elif options.mistake != "new-tape-zero":
        tape.zero()
        tape.reset()
print("loss", float(loss.numpy()[0]), "gradient norms", [round(n, 4) for n in norms])
