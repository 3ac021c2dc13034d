"""Kernels of the seeded-backward programs (tests/programs/seeded): a Jacobian-vector product taken with
``tape.backward(grads={y: seed})``, no scalar loss. Few kernels in one module: one Warp compile."""

import warp as wp


@wp.kernel
def cusp(x: wp.array(dtype=float), c: float, guarded: int, y: wp.array(dtype=float)):
    """y = -x - sqrt(|x - c|): finite at x = c, and central differences give -1 there, but the adjoint of sqrt at 0
    is 1/0, so backward alone makes x.grad -inf. Guarded, the cusp's own term is left out where it is 0."""
    s = wp.abs(x[0] - c)
    r = float(0.0)  # noqa: UP018 - a branch cannot assign to a literal constant
    if guarded == 0 or s > 0.0:
        r = wp.sqrt(s)
    y[0] = -x[0] - r


@wp.kernel
def square_of_sum(b: wp.array(dtype=float), n: int, y: wp.array(dtype=float)):
    """y = (sum of b[:n])^2 with a loop whose trip count is known only at run time: Warp 1.19 differentiates the
    accumulate-then-square as exactly 0 (field notes, section 9); central differences give 2·sum."""
    acc = float(0.0)  # noqa: UP018 - a dynamic loop cannot mutate a literal constant
    for j in range(n):
        acc += b[j]
    y[0] = acc * acc


@wp.kernel
def square_of_sum_fixed(b: wp.array(dtype=float), n: int, y: wp.array(dtype=float)):
    """The same with a constant trip count and a guard: Warp differentiates it right."""
    acc = float(0.0)  # noqa: UP018 - a dynamic loop cannot mutate a literal constant
    for j in range(4):
        if j < n:
            acc += b[j]
    y[0] = acc * acc


@wp.kernel
def scale(w: wp.array(dtype=float), z: wp.array(dtype=float)):
    """A launch on the tape that nothing seeded reads: w's values end in z, and z is nowhere in y."""
    i = wp.tid()
    z[i] = 3.0 * w[i]
