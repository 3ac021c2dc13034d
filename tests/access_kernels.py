"""Kernels for the argument-access test (tests/test_pure_warp_detectors.py): one of every kind of use."""

import warp as wp


@wp.func
def first(a: wp.array(dtype=float)):
    return a[0]


@wp.kernel
def accumulate_cast_and_load(
    x: wp.array(dtype=float),
    through: wp.array(dtype=float),
    loss: wp.array(dtype=float),
    total: wp.array(dtype=float),
    dest: wp.array(dtype=float),
    out: wp.array(dtype=float),
):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i])  # accumulated into: not read
    total[0] += x[i] * float(x.shape[0])  # `+=` on an array is atomic in Warp: not read; shape is metadata
    dest[i] = dest.dtype(x[i])  # stored into, its dtype read: not its values
    out[i] = first(through)  # a @wp.func that loads its argument: read
