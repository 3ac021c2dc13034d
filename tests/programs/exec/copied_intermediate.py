"""A correct program whose loss reads an array filled by a recorded ``wp.copy`` (both arrays have gradients, so
Warp records the copy): after backward the copy's destination has a zero gradient (Warp's adjoint copy clears it
once it has passed it on). The destination is an intermediate, not a leaf: nothing may call its gradient missing."""

import numpy as np
import warp as wp


@wp.kernel
def double(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i]


@wp.kernel
def total(z: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, z[i] * z[i])


x = wp.array(np.arange(4, dtype=np.float32), requires_grad=True)
y = wp.zeros(4, dtype=float, requires_grad=True)
z = wp.zeros(4, dtype=float, requires_grad=True)
for _ in range(2):
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(double, 4, inputs=[x], outputs=[y])
        wp.copy(z, y)
        wp.launch(total, 4, inputs=[z], outputs=[loss])
    tape.backward(loss)
    print("x.grad", x.grad.numpy(), "z.grad", z.grad.numpy())
    tape.zero()
