"""Gradients the program sets on purpose between ``tape.zero()`` and the next backward (Warp's own test_tape does
this: ``x.grad.fill_(0.25)`` then backward, expecting the gradient plus 0.25).

- ``--mistake none``: every gradient the tape reaches is zeroed by ``tape.zero()``; the program then prefills
  ``x.grad`` and ``b.grad`` with a known offset before each backward (fill_ and assign): nothing is a leftover.
- ``--mistake fresh-tape-zero``: the zero step is ``wp.Tape().zero()`` (a new tape: it zeroes nothing) and only
  ``x.grad`` is prefilled (fill_ overwrites it); ``b.grad`` keeps what the backward left, and the next backward adds
  to it: the zero audit must name ``b.grad``, and not ``x.grad``.
"""

import argparse

import numpy as np
import warp as wp

parser = argparse.ArgumentParser()
parser.add_argument("--mistake", choices=["none", "fresh-tape-zero"], default="none")
options = parser.parse_args()


@wp.kernel
def affine(x: wp.array(dtype=float), b: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i] + b[i]


@wp.kernel
def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, y[wp.tid()])


n = 7
x = wp.array(np.linspace(0.0, 1.0, n, dtype=np.float32), dtype=float, requires_grad=True)
b = wp.zeros(n, dtype=float, requires_grad=True)
y = wp.zeros(n, dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch(affine, n, inputs=[x, b], outputs=[y])
    wp.launch(total, n, inputs=[y], outputs=[loss])

for repeat in range(4):
    x.grad.fill_(0.25 * repeat)  # a deliberate offset: the expected gradient is 2 + 0.25 * repeat
    if options.mistake == "none":
        b.grad.assign(np.full(n, 0.125 * repeat, dtype=np.float32))
    tape.backward(loss)
    expected = 2.0 + 0.25 * repeat
    assert np.allclose(x.grad.numpy(), expected), (repeat, x.grad.numpy())
    print(repeat, float(x.grad.numpy()[0]), float(b.grad.numpy()[0]))
    if options.mistake == "fresh-tape-zero":
        wp.Tape().zero()
        continue
    tape.zero()
    assert not x.grad.numpy().any() and not b.grad.numpy().any()
