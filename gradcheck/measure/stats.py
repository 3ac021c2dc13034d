"""Gradient statistics computed on the device: only a few scalars per buffer reach the host.

One launch per scalar type covers any number of buffers: each buffer is cut into rows of at
most ``chunk`` scalars (one thread per row), and the host adds the rows of each buffer. On CPU a row is a
contiguous run (one thread walks memory in order); on CUDA a large buffer's rows are interleaved (row r reads
values r, r + R, r + 2R, ... for R rows), so at every step neighbouring threads read neighbouring values and
the loads coalesce. Per
buffer: squared L2 norm and max |g| over the finite values (accumulated in float64), NaN, Inf and
nonzero counts, a bit-exact position-weighted checksum (integer sums do not depend on the order
of threads, so it is deterministic on CUDA too), and, against a reference copy (pass 1): the
dot product and the squared difference over the values finite in both (NaN against NaN, or the same Inf, counts as
equal: a NaN gradient repeated on every pass is no accumulation; finite against non-finite counts as 1e300), and the
number of bit-level differences.

Works for float16/32/64 scalars, vectors and matrices of any shape; a strided buffer is first
copied to a contiguous one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from operator import is_

from gradcheck.measure.host_stats import FEW_BUFFERS, OUTPUT_TYPES, host_table

CPU_CHUNK = 1 << 16
CUDA_CHUNK = 1 << 12
# On CPU a Warp kernel runs on one thread: the statistics of a 16M-value buffer take ~47 ms, while numpy compares
# or scans its memory in ~5 ms. Buffers this large (in bytes) on CPU first try two exact shortcuts: bitwise equal
# to their reference (every later pass at the same params: the reference's statistics apply), or all bits zero
# (a cleared gradient). Only when neither holds does the kernel run for them.
CPU_SHORTCUT_BYTES = 1 << 22


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


def gradient_stats(buffers: list, references: list | None = None, device=None) -> list[GradStats]:
    """Stats of each Warp array in ``buffers`` (optionally against same-shaped ``references``)."""
    return StatsPlan().table(buffers, references, device).rows()


class StatsPlan:
    """Launch tables for a list of buffers, reused while the list stays the same.

    The observer asks for the stats of the same buffers pass after pass (the params, the ~2,400
    gradient buffers of a Newton rollout); rebuilding the (pointer, length) rows in Python each
    time cost more than the kernel. The plan keeps the device-side rows and output arrays and
    rebuilds them only when a pointer, size or dtype changes.
    """

    def __init__(self, shortcuts: bool = True, interleave: bool | None = None):
        self.shortcuts = shortcuts  # False: always the kernel (the plans the shortcuts fall back on)
        self.interleave = interleave  # rows interleaved (CUDA's layout); None: on CUDA devices only
        self._signature = None
        self._launches: list = []  # (kernel, inputs, outputs, row owner, run starts or None)
        self._sizes = None
        self._single: dict = {}  # large CPU buffer index → its own StatsPlan, run when no shortcut applies
        self._reference_stats: dict = {}  # id(reference) → (reference, its GradStats)
        self._last = None  # (buffers, references, device) of the last call, when its rows can be reused as built
        self._device_plans: dict[str, StatsPlan] = {}  # device → plan, for buffers on several devices
        self._layout_key = None  # the rows' layout (owners, lengths, offsets) the launches were built for
        self._views: dict[int, tuple] = {}  # id(array of structs) → (it, its float view): the last call's

    def table(self, buffers: list, references: list | None = None, device=None) -> StatsTable:
        import numpy as np
        import warp as wp

        n = len(buffers)
        references = references or [None] * n
        if _any_struct_array(buffers):  # arrays of structs: their float fields, in place
            buffers, references = self._float_views(buffers, references)
        has_reference = [r is not None for r in references]
        columns = {key: np.zeros(n, dtype=dtype) for key, dtype in OUTPUT_TYPES}
        if not n:
            return StatsTable(columns, np.zeros(0, dtype=np.int64), [])
        if self.shortcuts and n <= FEW_BUFFERS and not any(has_reference) and all(map(all_zero, buffers)):
            # a few small buffers, all zero bits (what a zero step leaves): exact statistics without a launch
            sizes = np.array([b.size * _scalars(b) for b in buffers], dtype=np.int64)
            return StatsTable(columns, sizes, has_reference)
        host = host_table(buffers, references) if self.shortcuts else None
        if host is not None:  # a few small CPU buffers: the kernel's numbers, read in place (measure.host_stats)
            return StatsTable(host[0], host[1], has_reference)
        keep = ()
        if self._same_as_last(buffers, references):
            device = self._last[2]
        else:
            # each buffer is read on its own device: a CPU pointer in a CUDA launch (or one GPU's in another's) is
            # an illegal address that poisons the program's CUDA context. ``device`` is no more than a hint.
            device, groups = _devices(buffers, references)
            if groups is not None:
                self._last = None
                return self._per_device(groups, buffers, references, columns, has_reference)
            large = [i for i, b in enumerate(buffers) if _shortcut_applies(b, device)] if self.shortcuts else []
            if large:
                self._last = None
                return self._with_shortcuts(buffers, references, device, large, columns, has_reference)
            keep = [b for b in buffers if not b.is_contiguous] + [
                r for r in references if r is not None and not r.is_contiguous
            ]
            # the same array objects next time mean the same rows: held here, so no other array can take their ids
            self._last = None if keep else (list(buffers), list(references), device)
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
            for (key, _), out in zip(OUTPUT_TYPES, outputs):
                values = out.numpy()
                if starts is None:  # one row per buffer
                    columns[key][owner] = values
                else:  # a buffer's rows are consecutive: reduce each run (uint64 wraps, as the checksum is defined)
                    reduce = np.maximum if key == "maxabs" else np.add
                    columns[key][owner[starts]] = reduce.reduceat(values, starts)
        del keep, buffers, references
        return StatsTable(columns, self._sizes, has_reference)

    def _float_views(self, buffers: list, references: list) -> tuple[list, list]:
        """Each array of all-float structs as its floats (warp_compat.float_view), any other buffer as it is. The
        views of the last call are reused: the same view objects let ``_same_as_last`` keep the rows as built."""
        last, self._views = self._views, {}

        def floats(buffer):
            if not _is_struct_array(buffer):
                return buffer
            kept = last.get(id(buffer))
            view = kept[1] if kept is not None and kept[0] is buffer else _floats(buffer)
            self._views[id(buffer)] = (buffer, view)
            return view

        return [floats(b) for b in buffers], [floats(r) for r in references]

    def _same_as_last(self, buffers: list, references: list) -> bool:
        """The very array objects of the last call (a Warp array's pointer, size, dtype, layout and device never
        change): the zero audit asks this of ~2,400 buffers every pass, and re-reading their attributes cost ~1 ms."""
        last = self._last
        return (
            last is not None
            and len(last[0]) == len(buffers)
            and all(map(is_, buffers, last[0]))
            and all(map(is_, references, last[1]))
        )

    def _with_shortcuts(self, buffers, references, device, large, columns, has_reference) -> StatsTable:
        """The batched kernel for the small buffers; each large CPU buffer by a shortcut, else its own launch."""
        import numpy as np

        from gradcheck.warp_compat import scalars_per_element

        chosen = set(large)
        small = [i for i in range(len(buffers)) if i not in chosen]
        sizes = np.array([b.size * scalars_per_element(b.dtype) for b in buffers], dtype=np.int64)
        if small:
            part = self._small.table([buffers[i] for i in small], [references[i] for i in small], device)
            for key in columns:
                columns[key][small] = part.columns[key]
        for i in large:
            stats = self._shortcut(buffers[i], references[i], device)
            if stats is None:
                plan = self._single.setdefault(i, StatsPlan(shortcuts=False))
                stats = plan.table([buffers[i]], [references[i]], device).row(0)
            for key, value in _columns_of(stats).items():
                columns[key][i] = value
        return StatsTable(columns, sizes, has_reference)

    def _per_device(self, groups: dict, buffers, references, columns, has_reference) -> StatsTable:
        """Buffers on several devices (a program with arrays on the CPU and a GPU): one plan per device, each
        buffer read where it lives; a reference kept on another device than its buffer is copied over first."""
        import numpy as np
        import warp as wp

        plans = self._device_plans
        sizes = np.zeros(len(buffers), dtype=np.int64)
        for device, indices in groups.items():
            plan = plans.get(device)
            if plan is None:
                plan = plans[device] = StatsPlan(self.shortcuts, self.interleave)
            mine = [buffers[i] for i in indices]
            theirs = [references[i] for i in indices]
            theirs = [r if r is None or str(r.device) == device else wp.clone(r, device=device) for r in theirs]
            part = plan.table(mine, theirs)
            for key in columns:
                columns[key][indices] = part.columns[key]
            sizes[indices] = part.sizes
        return StatsTable(columns, sizes, has_reference)

    @property
    def _small(self) -> StatsPlan:
        plan = getattr(self, "_small_plan", None)
        if plan is None:
            plan = self._small_plan = StatsPlan(shortcuts=False)
        return plan

    def _shortcut(self, buffer, reference, device) -> GradStats | None:
        """Exact statistics without the kernel, when the buffer's bits equal its reference's or are all zero."""
        import numpy as np

        bits = _bytes(buffer)
        if reference is not None:
            cached = self._reference_stats.get(id(reference))
            if cached is None or cached[0] is not reference:
                cached = (reference, StatsPlan(shortcuts=False).table([reference], None, device).row(0))
                self._reference_stats[id(reference)] = cached
            if np.array_equal(bits, _bytes(reference)):
                ref = cached[1]
                return GradStats(
                    ref.size,
                    ref.sumsq,
                    ref.max_abs,
                    ref.nan,
                    ref.inf,
                    ref.nonzero,
                    ref.checksum,
                    dot=ref.sumsq,
                    diffsq=0.0,
                    differ=0,
                )
            return None
        if not bits.any():
            from gradcheck.warp_compat import scalars_per_element

            return GradStats(buffer.size * scalars_per_element(buffer.dtype), 0.0, 0.0, 0, 0, 0, 0)
        return None

    def _repoint(self, groups: dict) -> bool:
        """Only the pointers moved (a fresh loss array each step, the same shapes): the rows are rewritten in place
        instead of allocating the plan's ten arrays again, which cost more than the statistics themselves."""
        if len(groups) != len(self._launches):
            return False
        for (_scalar, rows), (_kernel, inputs, _outputs, _owner, _starts) in zip(groups.items(), self._launches):
            _write(inputs[0], rows[1])
            _write(inputs[1], rows[2])
        return True

    def _build(self, buffers, references, device) -> None:
        import numpy as np
        import warp as wp

        from gradcheck.measure.kernels import stats_kernel
        from gradcheck.warp_compat import bytes_per_scalar, scalar_type, scalars_per_element

        interleave = device.is_cuda if self.interleave is None else self.interleave
        chunk = CUDA_CHUNK if interleave else CPU_CHUNK
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
                rows = groups[scalar] = ([], [], [], [], [], [])
            ptr = buffer.ptr or 0
            ref_ptr = (reference.ptr or 0) if reference is not None else 0
            count = -(-total // chunk) if total > chunk else 1
            for row in range(count):
                # CUDA: row r takes every count-th value from r (coalesced); CPU: a contiguous run of chunk values
                start, stride = (row, count) if interleave else (row * chunk, 1)
                rows[0].append(index)
                rows[1].append(ptr + start * itemsize)
                rows[2].append(ref_ptr + start * itemsize if ref_ptr else 0)
                rows[3].append(len(range(start, total, stride)) if interleave else min(chunk, total - start))
                rows[4].append(start)
                rows[5].append(stride)
        layout_key = [(s, device, *map(tuple, (r[0], r[3], r[4], r[5]))) for s, r in groups.items()]
        if layout_key == self._layout_key and self._repoint(groups):
            self._sizes = sizes
            return
        self._layout_key = layout_key
        self._launches = []
        for scalar, (owner, ptrs, ref_ptrs, lengths, offsets, strides) in groups.items():
            count = len(owner)
            inputs = [
                wp.array(np.array(ptrs, dtype=np.uint64), dtype=wp.uint64, device=device),
                wp.array(np.array(ref_ptrs, dtype=np.uint64), dtype=wp.uint64, device=device),
                wp.array(np.array(lengths, dtype=np.int32), dtype=wp.int32, device=device),
                wp.array(np.array(offsets, dtype=np.int64), dtype=wp.int64, device=device),
                wp.array(np.array(strides, dtype=np.int64), dtype=wp.int64, device=device),
            ]
            outputs = [wp.zeros(count, dtype=getattr(wp, dtype), device=device) for _, dtype in OUTPUT_TYPES]
            owner = np.asarray(owner, dtype=np.int64)
            starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
            self._launches.append(
                (stats_kernel(scalar), inputs, outputs, owner, None if len(starts) == count else starts)
            )
        self._sizes = sizes


def _any_struct_array(buffers: list) -> bool:
    """Whether an array of structs is among ``buffers`` (asked of ~2,400 buffers every pass: one class test each)."""
    from gradcheck.warp_compat import struct_type_class

    struct_class = struct_type_class()
    return any(getattr(b, "dtype", None).__class__ is struct_class for b in buffers)


def _is_struct_array(buffer) -> bool:
    from gradcheck.warp_compat import is_struct_type

    return buffer is not None and is_struct_type(getattr(buffer, "dtype", None))


def _floats(buffer):
    """An array of all-float structs as its floats (warp_compat.float_view); any other buffer as it is."""
    if not _is_struct_array(buffer):
        return buffer
    from gradcheck.warp_compat import float_view

    view = float_view(buffer)
    return view if view is not None else buffer


def _write(array, values) -> None:
    """Overwrite a plan's row column in place: through a view on the CPU, one copy to a GPU."""
    import numpy as np

    data = np.asarray(values, dtype=array.numpy().dtype if array.device.is_cpu else np.uint64)
    if array.device.is_cpu:
        array.numpy()[:] = data
    else:
        array.assign(data)


def _devices(buffers: list, references: list):
    """(the device, None) when every buffer and reference lives on one device, else (None, {device name: the
    indices of the buffers there})."""
    import warp as wp

    first = buffers[0].device
    if all(b.device == first for b in buffers) and all(r is None or r.device == first for r in references):
        return wp.get_device(first), None
    groups: dict = {}
    for i, b in enumerate(buffers):
        groups.setdefault(str(b.device), []).append(i)
    return None, groups


def _shortcut_applies(buffer, device) -> bool:
    # asked of every buffer the zero audit reaches (thousands a pass): the attribute-only size test first
    return (
        buffer.size * 64 >= CPU_SHORTCUT_BYTES  # no element is wider than 64 bytes (a mat44 of float32)
        and not device.is_cuda
        and buffer.is_contiguous
        and buffer.size * _element_bytes(buffer) >= CPU_SHORTCUT_BYTES
    )


def all_zero(buffer) -> bool | None:
    """Whether every bit of ``buffer`` is zero (as the kernel counts: -0.0 and NaN are nonzero), read in place with
    NumPy where that is exact and cheap (a contiguous CPU buffer); None elsewhere (ask the statistics kernel). A
    zero step's or an update's question about a few small buffers is then ~5 µs instead of a launch (~0.1 ms of
    Warp's Python: rows, ten output arrays, ten reads)."""
    if not buffer.ptr or not buffer.device.is_cpu or not buffer.is_contiguous:
        return None
    return not _bytes(buffer).any()


def _scalars(buffer) -> int:
    from gradcheck.warp_compat import scalars_per_element

    return scalars_per_element(buffer.dtype)


def _element_bytes(buffer) -> int:
    from gradcheck.warp_compat import bytes_per_scalar, scalar_type, scalars_per_element

    return scalars_per_element(buffer.dtype) * bytes_per_scalar(scalar_type(buffer.dtype))


def _bytes(buffer):
    """The buffer's memory as 64-bit words (a zero-copy view on CPU): equality and all-zero tests on bits, so
    NaN equals itself and -0.0 is not zero, as the kernel counts them."""
    import numpy as np

    raw = buffer.numpy().reshape(-1).view(np.uint8)
    return raw.view(np.uint64) if raw.size % 8 == 0 else raw


def _columns_of(stats: GradStats) -> dict:
    ref = stats.dot is not None
    return {
        "sumsq": stats.sumsq,
        "maxabs": stats.max_abs,
        "nans": stats.nan,
        "infs": stats.inf,
        "nonzero": stats.nonzero,
        "checksum": stats.checksum,
        "dot": stats.dot if ref else 0.0,
        "diffsq": stats.diffsq if ref else 0.0,
        "differ": stats.differ if ref else 0,
    }
