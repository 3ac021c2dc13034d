"""Warp kernels gradcheck launches itself (imported lazily: this module imports warp).

Gradient statistics for every param and for every gradient buffer the zero audit reaches
(thousands for a 100-step Newton rollout) on every pass. Reading each one from Python costs
microseconds apiece and dominated the pass; one launch over a table of (pointer, length) rows
covers them all, on CPU or CUDA, and only a few scalars per buffer come back to the host. Also the scale and
clamp kernels of gradient clipping (gradcheck.clip, ``--clip-norm``).

Kernels are made per scalar type from one Python function; each gets its own name, because the
closure over the scalar type is not part of Warp's module hash (same source, same module).
"""

from __future__ import annotations

import warp as wp

from gradcheck.warp_compat import make_kernel

_KERNELS: dict = {}

# In-kernel views over a raw pointer get this constant length, and the loops stop at the row's real length.
# Warp 1.8.0 accepts only a compile-time constant shape in ``wp.array(ptr=..., shape=...)`` inside a kernel
# (fixed in 1.9), so a per-row shape would not compile there.
VIEW_LENGTH = 2**31 - 1


# -- gradient statistics ----------------------------------------------------------------------------

_UINT_OF = {}  # scalar type → unsigned type of the same width, for bit-exact checksums


def _uint_for(scalar):
    if not _UINT_OF:
        _UINT_OF.update({wp.float16: wp.uint16, wp.float32: wp.uint32, wp.float64: wp.uint64})
    if scalar not in _UINT_OF:
        raise TypeError(f"gradient statistics need a float16/32/64 array, got {getattr(scalar, '__name__', scalar)}")
    return _UINT_OF[scalar]


def _make_stats(scalar, bits):
    def gradient_stats(
        ptrs: wp.array(dtype=wp.uint64),
        first_ptrs: wp.array(dtype=wp.uint64),
        lengths: wp.array(dtype=wp.int32),
        offsets: wp.array(dtype=wp.int64),
        strides: wp.array(dtype=wp.int64),
        sumsq: wp.array(dtype=wp.float64),
        maxabs: wp.array(dtype=wp.float64),
        nans: wp.array(dtype=wp.int64),
        infs: wp.array(dtype=wp.int64),
        nonzero: wp.array(dtype=wp.int64),
        checksum: wp.array(dtype=wp.uint64),
        dot: wp.array(dtype=wp.float64),
        diffsq: wp.array(dtype=wp.float64),
        differ: wp.array(dtype=wp.int64),
    ):
        i = wp.tid()
        n = lengths[i]
        values = wp.array(ptr=ptrs[i], shape=(VIEW_LENGTH,), dtype=scalar)
        raw = wp.array(ptr=ptrs[i], shape=(VIEW_LENGTH,), dtype=bits)
        has_first = first_ptrs[i] != wp.uint64(0)
        first = wp.array(ptr=first_ptrs[i], shape=(VIEW_LENGTH,), dtype=scalar)
        first_raw = wp.array(ptr=first_ptrs[i], shape=(VIEW_LENGTH,), dtype=bits)
        base = offsets[i]
        step = strides[i]  # 1: a contiguous row (CPU); the row count: interleaved rows, coalesced reads (CUDA)
        s = wp.float64(0.0)
        m = wp.float64(0.0)
        nn = wp.int64(0)
        ni = wp.int64(0)
        nz = wp.int64(0)
        cs = wp.uint64(0)
        d = wp.float64(0.0)
        dd = wp.float64(0.0)
        df = wp.int64(0)
        for jj in range(n):
            j = wp.int64(jj) * step
            x = wp.float64(values[j])
            if x != x:
                nn += wp.int64(1)
            elif wp.isinf(x):
                ni += wp.int64(1)
            else:
                s += x * x
                a = wp.abs(x)
                if a > m:
                    m = a
            if x != wp.float64(0.0):
                nz += wp.int64(1)
            position = wp.uint64(2) * wp.uint64(base + j) + wp.uint64(1)
            cs += wp.uint64(raw[j]) * position  # unsigned: wraps, and the sum is order-independent
            if has_first:
                f = wp.float64(first[j])
                if wp.isfinite(x) and wp.isfinite(f):
                    d += x * f
                    e = x - f
                    dd += e * e
                elif not (x != x and f != f) and x != f:  # NaN against NaN, or the same Inf, is no difference
                    dd += wp.float64(1.0e300)  # finite against not, or another Inf: never within a tolerance
                if raw[j] != first_raw[j]:
                    df += wp.int64(1)
        sumsq[i] = s
        maxabs[i] = m
        nans[i] = nn
        infs[i] = ni
        nonzero[i] = nz
        checksum[i] = cs
        dot[i] = d
        diffsq[i] = dd
        differ[i] = df

    return make_kernel(gradient_stats, f"gradcheck_stats_{scalar.__name__}")


def _cached(kind: str, scalar, make):
    """One kernel per (kind, scalar type), built on first use."""
    key = (kind, scalar.__name__)
    if key not in _KERNELS:
        _KERNELS[key] = make()
    return _KERNELS[key]


def stats_kernel(scalar):
    return _cached("stats", scalar, lambda: _make_stats(scalar, _uint_for(scalar)))


# -- clipping -----------------------------------------------------------------------------------------


def _make_scale(scalar):
    def scale_values(values: wp.array(dtype=scalar), factor: wp.float64):
        i = wp.tid()
        values[i] = scalar(wp.float64(values[i]) * factor)

    return make_kernel(scale_values, f"gradcheck_scale_{scalar.__name__}")


def _make_clamp(scalar):
    def clamp_values(values: wp.array(dtype=scalar), limit: wp.float64, changed: wp.array(dtype=wp.int32)):
        i = wp.tid()
        x = wp.float64(values[i])
        # NaN fails both comparisons and stays NaN: unlike wp.clamp, which maps it to the lower bound
        if x > limit:
            values[i] = scalar(limit)
            wp.atomic_add(changed, 0, 1)
        elif x < -limit:
            values[i] = scalar(-limit)
            wp.atomic_add(changed, 0, 1)

    return make_kernel(clamp_values, f"gradcheck_clamp_{scalar.__name__}")


def scale_kernel(scalar):
    return _cached("scale", scalar, lambda: _make_scale(scalar))


def clamp_kernel(scalar):
    return _cached("clamp", scalar, lambda: _make_clamp(scalar))
