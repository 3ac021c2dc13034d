"""Gradient statistics computed on the device: only a few scalars per buffer reach the host.

One launch per scalar type covers any number of buffers: each buffer is cut into rows of at
most ``chunk`` scalars (one thread per row), and the host adds the rows of each buffer. Per
buffer: squared L2 norm and max |g| over the finite values (accumulated in float64), NaN, Inf and
nonzero counts, a bit-exact position-weighted checksum (integer sums do not depend on the order
of threads, so it is deterministic on CUDA too), and, against a reference copy (pass 1): the
dot product, the squared difference and the number of bit-level differences.

Works for float16/32/64 scalars, vectors and matrices of any shape; a strided buffer is first
copied to a contiguous one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

CPU_CHUNK = 1 << 16
CUDA_CHUNK = 1 << 12


@dataclass(frozen=True)
class GradStats:
    size: int  # scalar values (a vec3 element counts 3)
    sumsq: float  # over finite values
    max_abs: float  # over finite values
    nan: int
    inf: int
    nonzero: int  # NaN and Inf count as nonzero
    checksum: int  # sum over i of bits(g_i) * (2i + 1), mod 2**64
    dot: float | None = None  # <g, reference>
    diffsq: float | None = None  # ||g - reference||^2
    differ: int | None = None  # values whose bits differ from the reference

    @property
    def norm(self) -> float:
        return math.sqrt(self.sumsq)

    @property
    def nonfinite(self) -> int:
        return self.nan + self.inf


class StatsTable:
    """Stats of many buffers as numpy columns; GradStats objects are built only for the rows asked for
    (the zero audit looks at thousands of buffers a pass and needs objects for the few nonzero ones)."""

    def __init__(self, columns: dict, sizes, has_reference):
        self.columns = columns
        self.sizes = sizes
        self.has_reference = has_reference

    def __len__(self) -> int:
        return len(self.sizes)

    def nonzero_indices(self) -> list[int]:
        import numpy as np

        return np.flatnonzero(self.columns["nonzero"]).tolist()

    def row(self, i: int) -> GradStats:
        c = self.columns
        ref = bool(self.has_reference[i])
        return GradStats(
            size=int(self.sizes[i]),
            sumsq=float(c["sumsq"][i]),
            max_abs=float(c["maxabs"][i]),
            nan=int(c["nans"][i]),
            inf=int(c["infs"][i]),
            nonzero=int(c["nonzero"][i]),
            checksum=int(c["checksum"][i]),
            dot=float(c["dot"][i]) if ref else None,
            diffsq=float(c["diffsq"][i]) if ref else None,
            differ=int(c["differ"][i]) if ref else None,
        )

    def rows(self) -> list[GradStats]:
        return [self.row(i) for i in range(len(self))]


_OUTPUTS = (
    ("sumsq", "float64"),
    ("maxabs", "float64"),
    ("nans", "int64"),
    ("infs", "int64"),
    ("nonzero", "int64"),
    ("checksum", "uint64"),
    ("dot", "float64"),
    ("diffsq", "float64"),
    ("differ", "int64"),
)


def gradient_stats(buffers: list, references: list | None = None, device=None) -> list[GradStats]:
    """Stats of each Warp array in ``buffers`` (optionally against same-shaped ``references``)."""
    return StatsPlan().table(buffers, references, device).rows()


class StatsPlan:
    """Launch tables for a list of buffers, reused while the list stays the same.

    The runner asks for the stats of the same buffers pass after pass (the params, the ~2,400
    gradient buffers of a Newton rollout); rebuilding the (pointer, length) rows in Python each
    time cost more than the kernel. The plan keeps the device-side rows and output arrays and
    rebuilds them only when a pointer, size or dtype changes.
    """

    def __init__(self):
        self._signature = None
        self._launches: list = []  # (kernel, inputs, outputs, row owner, run starts or None)
        self._sizes = None

    def table(self, buffers: list, references: list | None = None, device=None) -> StatsTable:
        import numpy as np
        import warp as wp

        n = len(buffers)
        references = references or [None] * n
        has_reference = [r is not None for r in references]
        columns = {key: np.zeros(n, dtype=dtype) for key, dtype in _OUTPUTS}
        if not n:
            return StatsTable(columns, np.zeros(0, dtype=np.int64), [])
        device = wp.get_device(device or buffers[0].device)
        keep = [b for b in buffers if not b.is_contiguous] + [
            r for r in references if r is not None and not r.is_contiguous
        ]
        if keep:  # strided: stats over contiguous copies, made fresh every time
            buffers = [b if b.is_contiguous else wp.clone(b) for b in buffers]
            references = [r if r is None or r.is_contiguous else wp.clone(r) for r in references]
        signature = (
            [b.ptr for b in buffers],
            [b.size for b in buffers],
            [b.dtype for b in buffers],
            [r.ptr if r is not None else 0 for r in references],
            device,
        )
        if signature != self._signature:
            self._build(buffers, references, device)
            self._signature = signature
        for kernel, inputs, outputs, owner, starts in self._launches:
            wp.launch(kernel, dim=len(owner), inputs=inputs, outputs=outputs, device=device, record_tape=False)
            for (key, _), out in zip(_OUTPUTS, outputs):
                values = out.numpy()
                if starts is None:  # one row per buffer
                    columns[key][owner] = values
                else:  # a buffer's rows are consecutive: reduce each run (uint64 wraps, as the checksum is defined)
                    reduce = np.maximum if key == "maxabs" else np.add
                    columns[key][owner[starts]] = reduce.reduceat(values, starts)
        del keep, buffers, references
        return StatsTable(columns, self._sizes, has_reference)

    def _build(self, buffers, references, device) -> None:
        import numpy as np
        import warp as wp

        from gradcheck.probes.kernels import stats_kernel
        from gradcheck.probes.warp_compat import bytes_per_scalar, scalar_type, scalars_per_element

        chunk = CUDA_CHUNK if device.is_cuda else CPU_CHUNK
        sizes = np.zeros(len(buffers), dtype=np.int64)
        layout: dict = {}  # dtype → (scalar type, scalars per element, bytes per scalar)
        groups: dict = {}  # scalar type → row columns (owner, ptr, reference ptr, length, offset)
        for index, (buffer, reference) in enumerate(zip(buffers, references)):
            info = layout.get(buffer.dtype)
            if info is None:
                scalar = scalar_type(buffer.dtype)
                info = layout[buffer.dtype] = (
                    scalar,
                    scalars_per_element(buffer.dtype),
                    bytes_per_scalar(scalar),
                )
            scalar, width, itemsize = info
            total = buffer.size * width
            sizes[index] = total
            rows = groups.get(scalar)
            if rows is None:
                rows = groups[scalar] = ([], [], [], [], [])
            ptr = buffer.ptr or 0
            ref_ptr = (reference.ptr or 0) if reference is not None else 0
            for start in range(0, total, chunk) if total > chunk else (0,):
                rows[0].append(index)
                rows[1].append(ptr + start * itemsize)
                rows[2].append(ref_ptr + start * itemsize if ref_ptr else 0)
                rows[3].append(min(chunk, total - start))
                rows[4].append(start)
        self._launches = []
        for scalar, (owner, ptrs, ref_ptrs, lengths, offsets) in groups.items():
            count = len(owner)
            inputs = [
                wp.array(np.array(ptrs, dtype=np.uint64), dtype=wp.uint64, device=device),
                wp.array(np.array(ref_ptrs, dtype=np.uint64), dtype=wp.uint64, device=device),
                wp.array(np.array(lengths, dtype=np.int32), dtype=wp.int32, device=device),
                wp.array(np.array(offsets, dtype=np.int64), dtype=wp.int64, device=device),
            ]
            outputs = [wp.zeros(count, dtype=getattr(wp, dtype), device=device) for _, dtype in _OUTPUTS]
            owner = np.asarray(owner, dtype=np.int64)
            starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
            self._launches.append(
                (stats_kernel(scalar), inputs, outputs, owner, None if len(starts) == count else starts)
            )
        self._sizes = sizes
