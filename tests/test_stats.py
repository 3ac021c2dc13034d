"""On-device gradient statistics against NumPy: dtypes, vectors, matrices, strides, NaN/Inf, checksums."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

from gradcheck.measure.stats import StatsPlan, gradient_stats


def _reference(values: np.ndarray) -> dict:
    flat = values.astype(np.float64).ravel()
    finite = flat[np.isfinite(flat)]
    return {
        "sumsq": float(np.sum(finite * finite)),
        "max_abs": float(np.max(np.abs(finite))) if finite.size else 0.0,
        "nan": int(np.isnan(flat).sum()),
        "inf": int(np.isinf(flat).sum()),
        "nonzero": int(np.count_nonzero(flat)),
    }


@pytest.mark.parametrize(
    ("dtype", "np_dtype", "shape"),
    [
        (wp.float16, np.float16, (7,)),
        (wp.float32, np.float32, (5, 4)),
        (wp.float64, np.float64, (3, 2, 2)),
        (wp.vec3, np.float32, (6, 3)),
        (wp.mat33, np.float32, (4, 3, 3)),
    ],
)
def test_stats_match_numpy(dtype, np_dtype, shape):
    values = np.random.default_rng(1).normal(size=shape).astype(np_dtype) * 3
    values.flat[1] = np.nan
    values.flat[2] = np.inf
    values.flat[3] = 0.0
    array = wp.array(values, dtype=dtype, device="cpu")
    (stats,) = gradient_stats([array])
    ref = _reference(values)
    assert stats.sumsq == pytest.approx(ref["sumsq"], rel=1e-12)
    assert stats.max_abs == pytest.approx(ref["max_abs"], rel=1e-12)
    assert (stats.nan, stats.inf, stats.nonzero, stats.size) == (ref["nan"], ref["inf"], ref["nonzero"], values.size)


def test_strided_views_and_large_buffers_split_into_rows():
    base = wp.array(np.arange(4_000_000, dtype=np.float32).reshape(2_000_000, 2), dtype=float, device="cpu")
    column = base[:, 1]  # strided view
    assert not column.is_contiguous
    (stats,) = gradient_stats([column])
    expected = np.arange(1, 4_000_000, 2, dtype=np.float64)
    assert stats.sumsq == pytest.approx(float(np.sum(expected * expected)), rel=1e-12)
    assert stats.size == 2_000_000 and stats.nonzero == 2_000_000


def test_reference_comparison_and_bit_exact_checksum():
    a = wp.array([1.0, -2.0, 0.0, np.nan], dtype=float, device="cpu")
    same = wp.clone(a)
    doubled = wp.array([2.0, -4.0, 0.0, np.nan], dtype=float, device="cpu")
    swapped = wp.array([-2.0, 1.0, 0.0, np.nan], dtype=float, device="cpu")
    negzero = wp.array([1.0, -2.0, -0.0, np.nan], dtype=float, device="cpu")
    s_same, s_double = gradient_stats([same, doubled], [a, a])
    assert s_same.differ == 0 and s_same.checksum == gradient_stats([a])[0].checksum
    # NaN against NaN is no difference (a NaN gradient repeated every pass is not accumulation under CUDA's
    # tolerance); the finite values are compared, and the bits count every difference
    assert (s_double.dot, s_double.diffsq, s_double.differ) == (10.0, 5.0, 2)
    (to_nan,) = gradient_stats([wp.array([1.0, np.nan], dtype=float)], [wp.array([1.0, 2.0], dtype=float)])
    (to_inf,) = gradient_stats([wp.array([np.inf, -np.inf], dtype=float)], [wp.array([np.inf, np.inf], dtype=float)])
    assert to_nan.diffsq >= 1e300 and to_inf.diffsq >= 1e300  # finite against not, or another Inf: never equal
    (finite_double,) = gradient_stats([wp.array([2.0, -4.0], dtype=float)], [wp.array([1.0, -2.0], dtype=float)])
    assert (finite_double.dot, finite_double.diffsq, finite_double.differ) == (10.0, 5.0, 2)
    assert gradient_stats([swapped])[0].checksum != gradient_stats([a])[0].checksum  # order matters
    assert gradient_stats([negzero])[0].checksum != gradient_stats([a])[0].checksum  # bits, not values
    assert gradient_stats([negzero])[0].nonzero == 3  # -0.0 is zero, NaN is not


def test_plan_reuses_tables_but_sees_new_values():
    a = wp.array([1.0, 2.0], dtype=float, device="cpu")
    plan = StatsPlan()
    first = plan.table([a]).row(0)
    a.fill_(3.0)
    second = plan.table([a]).row(0)
    assert first.sumsq == 5.0 and second.sumsq == 18.0


def test_large_cpu_buffers_take_exact_shortcuts():
    """Bitwise equal to the reference, or all bits zero: the statistics without the kernel are the kernel's,
    to the bit; anything else (one value changed, a NaN, a -0.0) goes to the kernel."""
    import numpy as np
    import warp as wp

    from gradcheck.measure.stats import CPU_SHORTCUT_BYTES, StatsPlan

    n = CPU_SHORTCUT_BYTES // 4
    rng = np.random.default_rng(3)
    values = rng.standard_normal(n).astype(np.float32)
    reference = wp.array(values, dtype=float, device="cpu")
    cases = {"equal": values.copy(), "zero": np.zeros(n, np.float32)}
    cases["one-changed"] = values.copy()
    cases["one-changed"][n // 2] += 1.0
    cases["nan"] = values.copy()
    cases["nan"][7] = np.nan
    cases["negative-zero"] = np.zeros(n, np.float32)
    cases["negative-zero"][5] = -0.0
    fast, kernel = StatsPlan(), StatsPlan(shortcuts=False)
    for name, data in cases.items():
        buffer = wp.array(data, dtype=float, device="cpu")
        for ref in (reference, None):
            got = fast.table([buffer], [ref]).row(0)
            want = kernel.table([buffer], [ref]).row(0)
            assert repr(got) == repr(want), (name, ref is not None, got, want)  # repr: NaN equals NaN


def test_cuda_row_layout_reads_interleaved_values_and_gives_the_same_statistics():
    """CUDA's layout (row r reads r, r + R, ...: coalesced) run on CPU: counts, max and the position-weighted
    checksum are exact; sums differ from the contiguous layout only by the order of float64 additions."""
    import math

    import numpy as np
    import warp as wp

    from gradcheck.measure.stats import CUDA_CHUNK, StatsPlan

    rng = np.random.default_rng(11)
    n = 3 * CUDA_CHUNK * CUDA_CHUNK // 64 + 17  # several rows, the last one shorter
    values = rng.standard_normal(n).astype(np.float32)
    values[[5, 999]] = [np.nan, np.inf]
    values[100:200] = 0.0
    buffer = wp.array(values, dtype=float, device="cpu")
    reference = wp.array(values * 0.5, dtype=float, device="cpu")
    small = wp.array(values[:10], dtype=float, device="cpu")  # batched with it, one row
    contiguous = StatsPlan(shortcuts=False, interleave=False).table([buffer, small], [reference, None]).rows()
    interleaved = StatsPlan(shortcuts=False, interleave=True).table([buffer, small], [reference, None]).rows()
    for a, b in zip(contiguous, interleaved):
        assert (a.size, a.max_abs, a.nan, a.inf, a.nonzero, a.checksum, a.differ) == (
            b.size,
            b.max_abs,
            b.nan,
            b.inf,
            b.nonzero,
            b.checksum,
            b.differ,
        )
        for x, y in ((a.sumsq, b.sumsq), (a.dot, b.dot), (a.diffsq, b.diffsq)):
            assert (x is None and y is None) or math.isclose(x, y, rel_tol=1e-12) or (math.isnan(x) and math.isnan(y))
    finite = values[np.isfinite(values)].astype(np.float64)
    assert math.isclose(interleaved[0].sumsq, float(finite @ finite), rel_tol=1e-9)


def test_a_plan_repoints_its_rows_when_only_the_buffers_moved():
    """A fresh loss array every step (same shapes, new pointers): the rows are rewritten in place, not rebuilt,
    and the statistics are those of the new buffers."""
    plan = StatsPlan(shortcuts=False)
    x = wp.array(np.arange(1, 65, dtype=np.float32), dtype=float)
    plan.table([x, wp.array([3.0], dtype=float)])
    launches = plan._launches
    for step in range(3):
        loss = wp.array([float(step) - 1.5], dtype=float)
        rows = plan.table([x, loss]).rows()
        assert plan._launches is launches
        assert rows[1].max_abs == pytest.approx(abs(step - 1.5)) and rows[1].nonzero == 1
        assert rows[0].sumsq == pytest.approx(float(np.sum(np.arange(1, 65, dtype=np.float64) ** 2)))
    longer = wp.zeros(3, dtype=float)
    assert plan.table([x, longer]).rows()[1].size == 3 and plan._launches is not launches
