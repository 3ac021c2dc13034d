"""A fit through a conditional expression whose two branches read the same array element, as a training script.
Warp 1.16.0 lost the taken branch's adjoint (the gradient through it is 0; fixed in 1.17.0, field notes section 7):
exec's default adjoint test must name the kernel there, and stay silent on every other release."""

import numpy as np
import warp as wp


@wp.kernel
def gain(x: wp.array(dtype=float), c: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    p = x[i] if c[i] > 0.0 else 0.5 * x[i]
    y[i] = 2.0 * p


@wp.kernel
def sq_error(y: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = y[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd(x: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * g[i]


def main() -> None:
    wp.init()
    n = 6
    x = wp.array(np.linspace(0.2, 1.2, n).astype(np.float32), requires_grad=True)
    c = wp.array(np.array([1.0, -1.0] * (n // 2), dtype=np.float32))
    y = wp.zeros(n, dtype=float, requires_grad=True)
    target = wp.array(np.full(n, 1.0, dtype=np.float32))
    for _ in range(3):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(gain, dim=n, inputs=[x, c], outputs=[y])
            wp.launch(sq_error, dim=n, inputs=[y, target], outputs=[loss])
        tape.backward(loss)
        wp.launch(sgd, dim=n, inputs=[x, x.grad, 0.05])
        print(f"loss {loss.numpy()[0]:.6f}")
        tape.zero()


if __name__ == "__main__":
    main()
