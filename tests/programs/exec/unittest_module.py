"""A unittest module (as Warp's and Newton's own tests are): the arrays are locals of test methods, gone by the
time the report is written, and every call passes through unittest's frames.

- ``--mistake none``: each test zeroes its tape: nothing to find;
- ``--mistake no-zero``: ``test_fit`` forgets ``tape.zero()`` between SGD steps: the accumulation must be named
  by the test's own variable (``weights.grad``) at the test's own line, never ``array#…`` or ``unittest/case.py``.
"""

import sys
import unittest

import numpy as np
import warp as wp

MISTAKE = "none"


@wp.kernel
def squared_error(w: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = w[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd(w: wp.array(dtype=float), g: wp.array(dtype=float)):
    i = wp.tid()
    w[i] = w[i] - 0.1 * g[i]


class FitTest(unittest.TestCase):
    def test_fit(self):
        weights = wp.array(np.zeros(16, dtype=np.float32), dtype=float, requires_grad=True)
        target = wp.array(np.linspace(0.0, 1.0, 16, dtype=np.float32), dtype=float)
        tape = wp.Tape()
        for _ in range(4):
            loss = wp.zeros(1, dtype=float, requires_grad=True)
            with tape:
                wp.launch(squared_error, 16, inputs=[weights, target], outputs=[loss])
            tape.backward(loss)
            wp.launch(sgd, 16, inputs=[weights, weights.grad])
            if MISTAKE == "none":
                tape.zero()
            tape.reset() if MISTAKE == "none" else setattr(tape, "launches", [])
        self.assertGreater(float(weights.numpy()[-1]), 0.0)

    def test_other(self):
        values = wp.array(np.ones(4, dtype=np.float32), dtype=float, requires_grad=True)
        self.assertEqual(values.shape, (4,))


if __name__ == "__main__":
    if "--mistake" in sys.argv:
        at = sys.argv.index("--mistake")
        MISTAKE = sys.argv[at + 1]
        del sys.argv[at : at + 2]
    unittest.main()
