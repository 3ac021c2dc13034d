"""The host-side shortcuts of the statistics (gradcheck.measure.stats): exact, or not taken.

``host_checksums`` must give the kernel's checksum bit for bit (the zero audit compares checksums taken by either
path), and ``all_zero`` must say "zero" exactly when the kernel would count every value zero with all-zero bits."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

from gradcheck.measure.host_stats import host_checksums, host_table
from gradcheck.measure.stats import StatsPlan, all_zero


@pytest.fixture(scope="module")
def arrays():
    wp.init()
    rng = np.random.default_rng(7)
    return [
        wp.array(rng.standard_normal(100).astype(np.float32), device="cpu"),
        wp.array(rng.standard_normal((7, 3)).astype(np.float32), dtype=wp.vec3, device="cpu"),
        wp.array(rng.standard_normal(50), dtype=wp.float64, device="cpu"),
        wp.array(rng.standard_normal(33).astype(np.float16), dtype=wp.float16, device="cpu"),
        wp.array(np.array([np.nan, -0.0, np.inf, 1.0], dtype=np.float32), device="cpu"),
    ]


def test_host_checksums_are_the_kernels(arrays):
    kernel = [row.checksum for row in StatsPlan(shortcuts=False).table(arrays).rows()]
    assert host_checksums(arrays) == kernel


def test_host_checksums_decline_what_they_cannot_do_exactly(arrays):
    big = wp.zeros(1 << 13, dtype=float, device="cpu")
    strided = wp.zeros((8, 8), dtype=float, device="cpu")[:, 1]
    assert host_checksums([big]) is None  # past HOST_ELEMENTS: the kernel reads it
    assert host_checksums([strided]) is None
    assert host_checksums(arrays * 2) is None  # more than a few buffers: one launch is cheaper


def test_all_zero_is_bits_not_values():
    zero = wp.zeros(16, dtype=float, device="cpu")
    negative_zero = wp.array(np.array([0.0, -0.0], dtype=np.float32), device="cpu")
    assert all_zero(zero) is True
    assert all_zero(negative_zero) is False  # -0.0 has a bit set: the kernel is asked
    table = StatsPlan().table([zero, wp.zeros(3, dtype=wp.vec3, device="cpu")])  # the few-zero-buffers shortcut
    reference = StatsPlan(shortcuts=False).table([zero, wp.zeros(3, dtype=wp.vec3, device="cpu")])
    assert [r for r in table.rows()] == [r for r in reference.rows()]
    assert list(table.sizes) == [16, 9]


def _rows(buffers, references):
    """The kernel's rows, and the host's through StatsPlan (which takes the host path for a buffer or two)."""
    kernel = StatsPlan(shortcuts=False).table(buffers, references).rows()
    assert host_table(buffers, references) is not None  # the host path is the one compared
    return kernel, StatsPlan().table(buffers, references).rows()


def test_host_statistics_are_the_kernels_bit_for_bit(arrays):
    rng = np.random.default_rng(11)
    wide = rng.standard_normal(4000) * 10.0 ** rng.integers(-30, 30, 4000)  # sums that round differently by order
    special = np.array([np.nan, -0.0, np.inf, -np.inf, 3e38, -3e38, 0.0, 3.0])  # squares past float32
    buffers = [
        *arrays,
        wp.array(wide, dtype=wp.float64, device="cpu"),
        wp.array(special.astype(np.float32), device="cpu"),
    ]
    for buffer in buffers:
        kernel, host = _rows([buffer], [None])
        assert kernel == host, buffer
    for first, second in zip(buffers, buffers[1:]):
        kernel, host = _rows([first, second], [None, None])
        assert kernel == host

    # against references: the dot, the squared difference and differing bits (-0.0 against 0.0 differs in bits)
    finite = [b for b in buffers if np.isfinite(b.numpy()).all()]
    others = [wp.clone(b) for b in finite]
    others[0].numpy()[:5] += np.float32(0.25)
    others[1].numpy()[::3] *= 1.5
    others[-1].numpy()[::2] = -others[-1].numpy()[::2]
    signed = wp.array(np.array([0.0, -0.0, 1e-30, 2.0], dtype=np.float32), device="cpu")
    finite.append(signed)
    others.append(wp.array(np.array([-0.0, 0.0, -1e-30, 2.0], dtype=np.float32), device="cpu"))
    assert len(finite) >= 5
    for buffer, reference in zip(finite, others):
        kernel, host = _rows([buffer], [reference])
        assert kernel == host, buffer
    # a NaN or Inf against a reference is the kernel's (Warp 1.5 sums those terms otherwise): not taken here
    nonfinite = buffers[4]
    assert host_table([nonfinite], [wp.clone(nonfinite)]) is None


def test_host_statistics_leave_to_the_kernel_what_they_cannot_do_exactly(arrays):
    big = wp.zeros(1 << 13, dtype=float, device="cpu")
    strided = wp.zeros((8, 8), dtype=float, device="cpu")[:, 1]
    assert host_table([big], [None]) is None
    assert host_table([strided], [None]) is None
    assert host_table(arrays[:3], [None] * 3) is None  # more than two rows: one launch is cheaper
    assert host_table(arrays[:2], arrays[:2]) is None  # two gradients and their references: likewise
    assert host_table([arrays[0]], [arrays[2]]) is None  # a reference of another shape
    assert host_table([wp.zeros(4, dtype=wp.int32, device="cpu")], [None]) is None  # not floats
