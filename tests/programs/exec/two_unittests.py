"""Two tests of one module, each with its own tape (Warp's test_overwrite): the first runs a backward and ends; the
second records its own computation and ``tape.reset()``s it without a backward. That reset is the second test's
business, not the zero step of the first test's backward: no zero-audit finding. ``--mistake reuse`` has the
second test zero the *first* test's tape after adding to its gradient (a real leftover of that tape's zero step).
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


def first_test():
    a = wp.array(np.array([1.0, 2.0, 3.0]), dtype=float, requires_grad=True)
    b = wp.zeros_like(a)
    tape1 = wp.Tape()
    with tape1:
        wp.launch(square, 3, inputs=[a], outputs=[b])
    tape1.backward(grads={b: wp.ones_like(b)})
    np.testing.assert_allclose(a.grad.numpy(), [2.0, 4.0, 6.0])
    return tape1, a


def second_test(first_tape, first_a):
    a = wp.zeros(3, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(add_one, 3, inputs=[a])
    if options.mistake == "reuse":
        wp.launch(add_one, 3, inputs=[first_a.grad])  # a stray write the first tape's zero does not undo
        first_tape.launches = []
        first_tape.gradients = {}
        first_tape.zero()  # zeroes nothing: its gradients were dropped
    tape.reset()
    a.zero_()


tape1, a1 = first_test()
second_test(tape1, a1)
print("ok")
