"""A kernel with a conditional expression whose two branches read the same element, in a module of its own.

Warp 1.16.0 dropped the taken branch's adjoint in ``x[k] if c else 0.5 * x[k]`` (fixed in 1.17.0; field
notes, section 7). Its own module because Warp before 1.7 cannot compile conditional expressions in kernels
at all, and Warp builds a Python module's kernels together: the other spring-chain kernels must not fail with
it. spring-chain's ``--fault ternary-same-element`` uses it.
"""

from __future__ import annotations

import warp as wp


@wp.func
def site_energy(x: wp.array(dtype=wp.vec3), k: int, anchor: wp.array(dtype=wp.vec3), anchor_weight: float):
    e = 0.1 * wp.dot(x[k], x[k])
    if k == 0:
        pull = x[0] - anchor[0]
        e += anchor_weight * wp.dot(pull, pull)
    return e


@wp.kernel
def chain_energy_weighted(
    x: wp.array(dtype=wp.vec3),
    anchor: wp.array(dtype=wp.vec3),
    anchor_weight: float,
    rest: float,
    loss: wp.array(dtype=float),
):
    k = wp.tid()
    e = site_energy(x, k, anchor, anchor_weight)
    p = x[k] if k % 2 == 0 else 0.5 * x[k]  # both branches read x[k]: Warp 1.16.0 drops the taken one's adjoint
    e += 0.1 * wp.dot(p, p)
    if k + 1 < x.shape[0]:
        stretch = wp.length(x[k + 1] - x[k]) - rest
        e += stretch * stretch
    wp.atomic_add(loss, 0, e)
