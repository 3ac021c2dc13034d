"""A fit whose gradient norm is ~1e3: past a --max-norm of 100, far below the default 1e6. The observer must look
for where the explosion starts at the norm the check judges (gradcheck.audit(max_norm=100) once looked above 1e6
only)."""

import warp as wp


@wp.kernel
def steep(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 250.0 * x[i]


@wp.kernel
def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i])


@wp.kernel
def sgd(x: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * g[i]


def fit(steps: int = 3):
    x = wp.ones(16, dtype=float, requires_grad=True)
    for _ in range(steps):
        y = wp.zeros(16, dtype=float, requires_grad=True)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(steep, dim=16, inputs=[x], outputs=[y])
            wp.launch(total, dim=16, inputs=[y], outputs=[loss])
        tape.backward(loss)
        wp.launch(sgd, dim=16, inputs=[x, x.grad, 1e-6])
        tape.zero()
    return x


if __name__ == "__main__":
    fit()
