"""gradcheck.clip against a NumPy reference on float32 vec3 and mat33 gradients, NaN/Inf included."""

from __future__ import annotations

import math

import numpy as np
import pytest
import warp as wp

from gradcheck.clip import NonFiniteGradientError, clip_grad_norm, clip_grad_value, clip_on_tape

RNG = np.random.default_rng(7)


def _with_grad(dtype, grad_values):
    shape = grad_values.shape[: -1 if dtype is wp.vec3 else -2]
    array = wp.zeros(shape, dtype=dtype, device="cpu", requires_grad=True)
    array.grad.assign(wp.array(grad_values.astype(np.float32), dtype=dtype, device="cpu"))
    return array


def _cases():
    return [
        _with_grad(wp.vec3, RNG.normal(size=(5, 3)) * 3.0),
        _with_grad(wp.mat33, RNG.normal(size=(4, 3, 3)) * 2.0),
    ]


def test_clip_grad_norm_matches_numpy():
    arrays = _cases()
    before = [a.grad.numpy().astype(np.float64) for a in arrays]
    total_ref = math.sqrt(sum(float(np.sum(g * g)) for g in before))
    total = clip_grad_norm(arrays, max_norm=1.0)
    assert total == pytest.approx(total_ref, rel=1e-6)
    factor = 1.0 / (total_ref + 1e-6)
    for array, g in zip(arrays, before):
        np.testing.assert_allclose(array.grad.numpy(), g * factor, rtol=1e-6)
    after = math.sqrt(sum(float(np.sum(a.grad.numpy().astype(np.float64) ** 2)) for a in arrays))
    assert after == pytest.approx(1.0, rel=1e-5)


def test_clip_grad_norm_leaves_small_gradients_alone():
    arrays = _cases()
    before = [a.grad.numpy().copy() for a in arrays]
    clip_grad_norm(arrays, max_norm=1e6)
    for array, g in zip(arrays, before):
        np.testing.assert_array_equal(array.grad.numpy(), g)


def test_clip_grad_value_matches_numpy_and_keeps_nan():
    vec = RNG.normal(size=(6, 3)) * 2.0
    vec[1, 2] = np.nan
    vec[3, 0] = np.inf
    mat = RNG.normal(size=(3, 3, 3)) * 2.0
    mat[0, 1, 1] = -np.inf
    arrays = [_with_grad(wp.vec3, vec), _with_grad(wp.mat33, mat)]
    with pytest.warns(RuntimeWarning, match=r"arrays\[0\] \(1 NaN, 1 Inf\), arrays\[1\] \(0 NaN, 1 Inf\)"):
        changed = clip_grad_value(arrays, limit=0.5)
    expected_vec = np.clip(vec.astype(np.float32), -0.5, 0.5)  # np.clip keeps NaN, as we must
    expected_mat = np.clip(mat.astype(np.float32), -0.5, 0.5)
    np.testing.assert_array_equal(arrays[0].grad.numpy(), expected_vec)
    np.testing.assert_array_equal(arrays[1].grad.numpy(), expected_mat)
    assert np.isnan(arrays[0].grad.numpy()[1, 2])  # wp.clamp would have made it -0.5
    assert changed == int(np.sum(np.abs(vec) > 0.5) + np.sum(np.abs(mat) > 0.5))


def test_nonfinite_norm_is_reported_not_spread():
    vec = RNG.normal(size=(4, 3))
    vec[2, 1] = np.nan
    array = _with_grad(wp.vec3, vec)
    before = array.grad.numpy().copy()
    with pytest.warns(RuntimeWarning, match="non-finite gradient"):
        total = clip_grad_norm([array], max_norm=0.1)
    assert math.isnan(total)
    np.testing.assert_array_equal(array.grad.numpy(), before)  # untouched, NaN included


@pytest.mark.parametrize("clip", [lambda a: clip_grad_norm(a, 1.0, True), lambda a: clip_grad_value(a, 1.0, True)])
def test_error_if_nonfinite_raises_before_changing_anything(clip):
    mat = RNG.normal(size=(2, 3, 3)) * 10
    mat[1, 0, 0] = np.inf
    array = _with_grad(wp.mat33, mat)
    before = array.grad.numpy().copy()
    with pytest.raises(NonFiniteGradientError, match=r"arrays\[0\] \(0 NaN, 1 Inf\)"):
        clip([array])
    np.testing.assert_array_equal(array.grad.numpy(), before)


@wp.kernel
def _triple(x: wp.array(dtype=wp.vec3), y: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    y[i] = 3.0 * x[i]


@wp.kernel
def _sum_sq(y: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, wp.dot(y[i], y[i]))


X0 = np.random.default_rng(3).normal(size=(4, 3)).astype(np.float32) + 2.0


def _backward_through(clip: bool) -> np.ndarray:
    x = wp.array(X0, dtype=wp.vec3, device="cpu", requires_grad=True)
    y = wp.zeros(4, dtype=wp.vec3, device="cpu", requires_grad=True)
    loss = wp.zeros(1, dtype=float, device="cpu", requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(_triple, dim=4, inputs=[x], outputs=[y])
        if clip:
            clip_on_tape(tape, [y], max_norm=1.0)
        wp.launch(_sum_sq, dim=4, inputs=[y], outputs=[loss])
    tape.backward(loss)
    return x.grad.numpy().astype(np.float64)


def test_clip_on_tape_changes_the_gradient_backward_produces():
    plain = _backward_through(clip=False)
    clipped = _backward_through(clip=True)
    # dL/dy = 2y has norm >> 1; clipped to 1 inside backward, dL/dx = 3 * clipped dL/dy
    assert np.linalg.norm(plain) > 10
    assert np.linalg.norm(clipped) == pytest.approx(3.0, rel=1e-5)
    cos = float(np.sum(plain * clipped) / (np.linalg.norm(plain) * np.linalg.norm(clipped)))
    assert cos == pytest.approx(1.0, abs=1e-6)  # same direction, clipped magnitude
