"""Kernels of a module built with ``enable_backward=False``, one of them opted back in.

A common way to save compile time: turn adjoints off for a whole module of forward-only helpers, then opt in
the one kernel that needs a gradient with ``@wp.kernel(enable_backward=True)``. Up to Warp 1.17 the opted-in
kernel's own adjoint was generated, but the adjoints of the ``@wp.func`` functions it calls were not (they
follow the module's option): their contributions to the gradient were silently dropped (docs/warp-versions.md;
fixed in 1.18.0). On later Warp the same code is right. spring-chain's ``--fault backward-opt-in`` uses it.
"""

from __future__ import annotations

import warp as wp

wp.set_module_options({"enable_backward": False})


@wp.func
def stretch_energy(d: wp.vec3, rest: float):
    stretch = wp.length(d) - rest
    return stretch * stretch


@wp.kernel(enable_backward=True)
def chain_energy_opted_in(
    x: wp.array(dtype=wp.vec3),
    anchor: wp.array(dtype=wp.vec3),
    anchor_weight: float,
    rest: float,
    loss: wp.array(dtype=float),
):
    k = wp.tid()
    e = 0.1 * wp.dot(x[k], x[k])
    if k == 0:
        pull = x[0] - anchor[0]
        e += anchor_weight * wp.dot(pull, pull)
    if k + 1 < x.shape[0]:
        e += stretch_energy(x[k + 1] - x[k], rest)  # this call's adjoint follows the module's option on <= 1.17
    wp.atomic_add(loss, 0, e)
