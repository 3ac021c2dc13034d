"""The host-side shortcuts of the statistics (gradcheck.measure.stats): exact, or not taken.

``host_checksums`` must give the kernel's checksum bit for bit (the zero audit compares checksums taken by either
path), and ``all_zero`` must say "zero" exactly when the kernel would count every value zero with all-zero bits."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

from gradcheck.measure.stats import StatsPlan, all_zero, host_checksums


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
