"""One scratch array reused by two steps of a forward (Warp's Navier-Stokes perturbation example reuses its FFT
scratch: "safe because FFT/IFFT are linear so the adjoint doesn't need the forward intermediates").

- ``--step linear``: each step is ``y = c * s`` with a constant coefficient ``c`` (no gradient): the adjoint never
  reads ``s``, so rewriting it between the steps changes no gradient (the program checks the analytic value);
- ``--step square``: each step is ``y = s * s``: its adjoint reads ``s``, the rewrite mixes the two steps, and the
  gradient is wrong (the program prints the analytic and the tape's): write-after-read must say so.
"""

import argparse

import numpy as np
import warp as wp

parser = argparse.ArgumentParser()
parser.add_argument("--step", choices=["linear", "square"], default="linear")
options = parser.parse_args()


@wp.kernel
def load(x: wp.array(dtype=float), k: float, s: wp.array(dtype=float)):
    i = wp.tid()
    s[i] = k * x[i]


@wp.kernel
def scale(c: wp.array(dtype=float), s: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = c[i] * s[i]


@wp.kernel
def square(s: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = s[i] * s[i]


@wp.kernel
def total(a: wp.array(dtype=float), b: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, a[i] + b[i])


n = 4
x = wp.array(np.full(n, 1.5, dtype=np.float32), dtype=float, requires_grad=True)
c = wp.array(np.full(n, 3.0, dtype=np.float32), dtype=float)
s = wp.zeros(n, dtype=float, requires_grad=True)  # the shared scratch
y1, y2 = wp.zeros(n, dtype=float, requires_grad=True), wp.zeros(n, dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    for k, y in ((1.0, y1), (2.0, y2)):
        wp.launch(load, n, inputs=[x, k], outputs=[s])
        if options.step == "linear":
            wp.launch(scale, n, inputs=[c, s], outputs=[y])
        else:
            wp.launch(square, n, inputs=[s], outputs=[y])
    wp.launch(total, n, inputs=[y1, y2], outputs=[loss])
tape.backward(loss)
# d/dx of c*x + c*2x is 9; of x^2 + (2x)^2 it is 10x = 15
analytic = 9.0 if options.step == "linear" else 15.0
print("analytic", analytic, "tape", float(x.grad.numpy()[0]))
