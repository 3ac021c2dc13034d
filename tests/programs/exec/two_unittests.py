"""Two tests of one module, each with its own tape (Warp's test_overwrite): the first runs a backward and ends; the
second runs a backward over arrays of its own and ``tape.reset()``s its tape. Neither that backward nor that reset
has anything to do with the first test's gradients: no zero-audit finding. ``--mistake reuse`` has the
second test zero the *first* test's tape with its gradients dropped (zeroing nothing) and run the first computation
on it again: that backward adds to what the first left (a real leftover of that tape's zero step).
"""

import argparse

import numpy as np
import warp as wp

parser = argparse.ArgumentParser()
parser.add_argument("--mistake", choices=["none", "reuse"], default="none")
options = parser.parse_args()


@wp.kernel
def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel
def add_one(x: wp.array(dtype=float)):
    x[wp.tid()] += 1.0


@wp.kernel
def descend(x: wp.array(dtype=float), g: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = x[i] - 0.1 * g[i]


def first_test():
    a = wp.array(np.array([1.0, 2.0, 3.0]), dtype=float, requires_grad=True)
    b = wp.zeros_like(a)
    tape1 = wp.Tape()
    with tape1:
        wp.launch(square, 3, inputs=[a], outputs=[b])
    tape1.backward(grads={b: wp.ones_like(b)})
    np.testing.assert_allclose(a.grad.numpy(), [2.0, 4.0, 6.0])
    wp.launch(descend, 3, inputs=[a, a.grad])  # one step, and the test ends without a zero step
    return tape1, a


def second_test(first_tape, first_a):
    if options.mistake == "reuse":
        first_tape.launches = []
        first_tape.gradients = {}
        first_tape.zero()  # zeroes nothing: its gradients were dropped
        b = wp.zeros_like(first_a)
        with first_tape:  # and the first computation again, on the same tape: its backward adds to what was left
            wp.launch(square, 3, inputs=[first_a], outputs=[b])
        first_tape.backward(grads={b: wp.ones_like(b)})
    a = wp.zeros(3, dtype=float, requires_grad=True)
    out = wp.zeros(3, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square, 3, inputs=[a], outputs=[out])
    tape.backward(grads={out: wp.ones_like(out)})  # a backward over other arrays: adds nothing to the first's
    tape.reset()
    a.zero_()


tape1, a1 = first_test()
second_test(tape1, a1)
print("ok")
