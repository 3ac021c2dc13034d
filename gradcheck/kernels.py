"""Warp kernels gradcheck launches itself (imported lazily: this module imports warp).

The zero audit must look at every gradient buffer a tape can reach (thousands for a 100-step
Newton rollout) on every pass. Reading each one from Python costs microseconds apiece and
dominated the pass; one launch over a table of (pointer, length) pairs checks them all, on CPU
or CUDA, and only a count per buffer comes back to the host.
"""

from __future__ import annotations

import warp as wp

from gradcheck.warp_compat import scalar_type

_KERNELS: dict = {}


def _make_count_nonzero(scalar):
    def count_nonzero(
        ptrs: wp.array(dtype=wp.uint64),
        lengths: wp.array(dtype=wp.int32),
        counts: wp.array(dtype=wp.int32),
    ):
        i = wp.tid()
        values = wp.array(ptr=ptrs[i], shape=(lengths[i],), dtype=scalar)
        zero = scalar(0.0)
        c = int(0)  # noqa: UP018 - Warp needs int(0) to declare a mutable loop variable
        for j in range(lengths[i]):
            if values[j] != zero:  # NaN != 0 too: a NaN survivor counts
                c += 1
        counts[i] = c

    return wp.kernel(count_nonzero, enable_backward=False, module="unique")


def count_nonzero_kernel(scalar):
    """Kernel counting nonzero scalars in each (ptr, length) buffer of one scalar type."""
    key = scalar.__name__
    if key not in _KERNELS:
        _KERNELS[key] = _make_count_nonzero(scalar)
    return _KERNELS[key]


def count_nonzero(buffers, device) -> list[int]:
    """Nonzero scalar count of each contiguous wp.array in ``buffers`` (one launch per scalar type)."""
    import numpy as np

    per_dtype: dict = {}
    for index, arr in enumerate(buffers):
        per_dtype.setdefault(arr.dtype, []).append(index)
    groups: dict = {}  # scalar type → [(index, scalars per element)]
    for dtype, indices in per_dtype.items():
        width = wp.types.type_size(dtype)
        groups.setdefault(scalar_type(dtype), []).extend((i, width) for i in indices)
    counts = np.zeros(len(buffers), dtype=np.int64)
    for scalar, members in groups.items():
        indices = [i for i, _ in members]
        ptrs = np.array([buffers[i].ptr for i in indices], dtype=np.uint64)
        lengths = np.array([buffers[i].size * width for i, width in members], dtype=np.int32)
        out = wp.zeros(len(indices), dtype=wp.int32, device=device)
        wp.launch(
            count_nonzero_kernel(scalar),
            dim=len(indices),
            inputs=[wp.array(ptrs, dtype=wp.uint64, device=device), wp.array(lengths, dtype=wp.int32, device=device)],
            outputs=[out],
            device=device,
            record_tape=False,
        )
        counts[indices] = out.numpy()
    return counts.tolist()
