"""The statistics kernel's numbers for a few small CPU buffers, computed with NumPy on the host, bit for bit.

Why: an audited backward of a small training loop measures a handful of small gradients (a param's, the loss's),
and the kernel (gradcheck.measure.kernels) costs a launch plan, a Warp launch and reads of its output columns:
~60 µs of Warp's Python on the CPU, more than such a loop's own backward. NumPy reads the same memory in place in a
few µs. Only where the result is the kernel's exactly: the kernel sums each row in order, in float64, one thread a
row, and ``np.cumsum`` (an accumulate) adds in the same order, where ``np.sum``'s pairwise summation would not; the
checksum is integer arithmetic modulo 2**64. tests/test_stats_host.py holds every column to the kernel's on
float16/32/64 and vector arrays with NaN, Inf and -0.0, and against references (finite ones: a non-finite value
against a reference is left to the kernel, whose sum of such terms Warp 1.5 compiles otherwise), on every Warp of
the compat lane. Anything else (a GPU buffer, a strided or struct array, a large one, more than a buffer or two: one
launch is cheaper) is the kernel's: None here.
"""

from __future__ import annotations

HOST_ELEMENTS = 1 << 12  # a buffer up to this many elements may be read on the host
FEW_BUFFERS = 8  # checksums (a few NumPy calls each) of up to this many buffers; more are one launch
# Statistics: a reused launch plan costs ~40 µs however many rows, NumPy ~15 µs a row and as much again for its
# reference (measured on small CPU buffers), a plan built afresh ~200 µs: the host takes up to two such units (one
# gradient and its reference, or two gradients), where it is cheaper whatever the plan.
HOST_UNITS = 2
_UNSIGNED = {2: "uint16", 4: "uint32", 8: "uint64"}  # bytes per scalar → the unsigned type of its bits


def host_scalars(buffer):
    """``buffer``'s scalars as a flat NumPy view of its memory (no copy), or None where the host does not read it
    exactly and cheaply: not on the CPU, strided, a struct or non-float array, past HOST_ELEMENTS, unallocated."""
    from gradcheck.warp_compat import bytes_per_scalar, is_struct_type, scalar_type

    if not buffer.ptr or not buffer.device.is_cpu or not buffer.is_contiguous or buffer.size > HOST_ELEMENTS:
        return None
    if is_struct_type(buffer.dtype) or _UNSIGNED.get(bytes_per_scalar(scalar_type(buffer.dtype))) is None:
        return None
    values = buffer.numpy().reshape(-1)
    return values if values.dtype.kind == "f" else None


def host_checksums(buffers: list) -> list[int] | None:
    """The kernel's checksum of each buffer (sum of bits(g_i) * (2i + 1), mod 2**64), or None (ask the kernel). The
    fresh loss array a training loop allocates every iteration would otherwise rebuild a launch plan on every
    audited backward for one value."""
    if len(buffers) > FEW_BUFFERS:
        return None
    found = []
    for buffer in buffers:
        values = host_scalars(buffer)
        if values is None:
            return None
        found.append(_checksum(values))
    return found


def host_table(buffers: list, references: list):
    """(columns, sizes) as the kernel fills them (OUTPUT_TYPES, the kernel's output columns) for ``buffers`` against
    ``references`` (None entries: no reference), or None when any of them is not the host's to read."""
    import numpy as np

    if sum(1 if reference is None else 2 for reference in references) > HOST_UNITS:
        return None
    rows = []
    for buffer, reference in zip(buffers, references):
        values = host_scalars(buffer)
        first = host_scalars(reference) if reference is not None else None
        if values is None or (reference is not None and (first is None or first.shape != values.shape)):
            return None
        if first is not None and not (np.isfinite(values).all() and np.isfinite(first).all()):
            return None  # a NaN or Inf against a reference: older Warps' kernels (1.5) sum that term differently
        rows.append((values, first))
    n = len(rows)
    columns = {key: np.zeros(n, dtype=dtype) for key, dtype in OUTPUT_TYPES}
    with np.errstate(all="ignore"):  # squares past float64's range are Inf, as in the kernel; NaN compares
        for i, (values, first) in enumerate(rows):
            _fill(columns, i, values, first)
    return columns, np.array([values.size for values, _ in rows], dtype=np.int64)


OUTPUT_TYPES = (
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


def _fill(columns: dict, i: int, values, first) -> None:
    """Row ``i``: the kernel's loop over the row, one column at a time."""
    import numpy as np

    x = values.astype(np.float64)
    finite = np.isfinite(x)
    columns["nonzero"][i] = np.count_nonzero(x)  # NaN and Inf are nonzero, -0.0 is zero: as ``x != 0.0``
    columns["checksum"][i] = _checksum(values)
    if first is None and finite.all():  # the common row: nothing to mask, nothing to count (the same numbers)
        columns["sumsq"][i] = _in_order(x * x)
        columns["maxabs"][i] = np.abs(x).max(initial=0.0)
        return
    nan = np.isnan(x)
    columns["sumsq"][i] = _in_order(np.where(finite, x * x, 0.0))
    columns["maxabs"][i] = np.abs(np.where(finite, x, 0.0)).max(initial=0.0)
    columns["nans"][i] = np.count_nonzero(nan)
    columns["infs"][i] = x.size - np.count_nonzero(finite) - columns["nans"][i]
    if first is None:
        return
    f = first.astype(np.float64)
    both = finite & np.isfinite(f)
    unequal = ~(nan & np.isnan(f)) & (x != f)  # NaN against NaN, or the same Inf, is no difference
    columns["dot"][i] = _in_order(np.where(both, x * f, 0.0))
    columns["diffsq"][i] = _in_order(np.where(both, (x - f) * (x - f), np.where(unequal, 1.0e300, 0.0)))
    width = _UNSIGNED[values.dtype.itemsize]
    columns["differ"][i] = np.count_nonzero(values.view(width) != first.view(width))


def _in_order(terms) -> float:
    """``0.0 + t_0 + t_1 + …`` left to right in float64, as the kernel's loop adds (a skipped term is +0.0 here: the
    sum starts at +0.0 and never becomes -0.0, so adding +0.0 leaves it unchanged)."""
    import numpy as np

    return float(np.cumsum(terms)[-1]) if terms.size else 0.0


def _checksum(values) -> int:
    import numpy as np

    bits = values.view(_UNSIGNED[values.dtype.itemsize]).astype(np.uint64)
    position = _POSITIONS.get(bits.size)
    if position is None:  # 2i + 1 for each position, made once a size (a loop measures the same few sizes)
        if len(_POSITIONS) >= 64:
            _POSITIONS.clear()
        position = _POSITIONS[bits.size] = np.arange(bits.size, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    bits *= position  # in place: ``bits`` is this call's own copy
    return int(bits.sum(dtype=np.uint64))


_POSITIONS: dict = {}  # size → its checksum weights (at most HOST_ELEMENTS each, a few sizes kept)
