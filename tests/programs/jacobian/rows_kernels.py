"""The kernels the Jacobian-row programs share (one Warp module, compiled once for all of them)."""

import warp as wp


@wp.kernel
def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel
def store_row(g: wp.array(dtype=float), row: int, jacobian: wp.array2d(dtype=float)):
    j = wp.tid()
    jacobian[row, j] = g[j]


def one_hot(i: int, n: int = 3):
    """The seed of row ``i``: a new array each row (the seed's values are what differ between the backwards)."""
    seed = [0.0] * n
    seed[i] = 1.0
    return wp.array(seed, dtype=float)


def record():
    """x = [1, 2, 3] and y = x * x recorded once on a tape kept for every row: the Jacobian is diag(2, 4, 6)."""
    x = wp.array([1.0, 2.0, 3.0], dtype=float, requires_grad=True)
    y = wp.zeros(3, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square, dim=3, inputs=[x], outputs=[y])
    return x, y, tape
