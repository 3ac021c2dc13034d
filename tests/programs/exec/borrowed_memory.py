"""A fit loop on arrays built over another array's memory (``wp.array(ptr=...)``: they own nothing).

- ``--owners fresh`` (a correct program): each step allocates the value and gradient buffers, wraps them, takes one
  SGD step and frees them; the freed blocks are handed to new arrays at once. Reading a wrapper of an earlier step
  afterwards reads someone else's memory (a crash on a GPU): gradcheck must not, and must find nothing.
- ``--owners kept``: the buffers live through the whole loop (one set of wrappers), so everything can be read;
  ``--mistake no-zero`` then forgets ``tape.zero()``, and the accumulation must be found as on any other array.
"""

import argparse
import gc

import numpy as np
import warp as wp

parser = argparse.ArgumentParser()
parser.add_argument("--owners", choices=["fresh", "kept"], default="fresh")
parser.add_argument("--mistake", choices=["none", "no-zero"], default="none")
parser.add_argument("--steps", type=int, default=6)
options = parser.parse_args()


@wp.kernel
def squares(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


@wp.kernel
def sgd(x: wp.array(dtype=float), g: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = x[i] - 0.1 * g[i]


n = 64


def borrowed():
    owner = wp.array(np.linspace(0.0, 1.0, n, dtype=np.float32), dtype=float, device="cpu")
    gradient_owner = wp.zeros(n, dtype=float, device="cpu")
    x = wp.array(ptr=owner.ptr, dtype=float, shape=(n,), device="cpu")
    x.grad = wp.array(ptr=gradient_owner.ptr, dtype=float, shape=(n,), device="cpu")
    x.requires_grad = True
    return x, (owner, gradient_owner)


x, owners = borrowed()
for step in range(options.steps):
    if options.owners == "fresh":
        x, owners = borrowed()
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(squares, n, inputs=[x], outputs=[loss])
    tape.backward(loss)
    wp.launch(sgd, n, inputs=[x, x.grad], device="cpu")
    print(step, round(float(np.linalg.norm(x.grad.numpy())), 4))
    if options.mistake != "no-zero":
        tape.zero()
    if options.owners == "fresh":
        del owners
        gc.collect()
        reuse = [wp.full(n, 7.0e30, dtype=float, device="cpu") for _ in range(4)]  # the freed blocks, reused
