"""Gradient clipping for Warp arrays, in Warp kernels, NaN-aware.

``wp.clamp`` is scalar-only and maps NaN to the lower bound, so clipping by hand hides exactly
the gradients that most need attention. These functions work on float16/32/64 scalar, vector
and matrix gradients of any shape, on CPU and CUDA, never turn a NaN into a number, and either
report non-finite gradients (return value and a warning) or raise.

    from gradcheck.clip import clip_grad_norm, clip_grad_value, clip_on_tape

    total = clip_grad_norm([x, v], max_norm=1.0)      # like torch.nn.utils.clip_grad_norm_
    clipped = clip_grad_value([x], limit=0.5)          # like torch.nn.utils.clip_grad_value_
    clip_on_tape(tape, [state.joint_qd], max_norm=1.0)  # clip inside backward, at this point of the tape
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

__all__ = ["NonFiniteGradientError", "clip_grad_norm", "clip_grad_value", "clip_on_tape"]


class NonFiniteGradientError(FloatingPointError):
    """Raised with ``error_if_nonfinite=True`` when a gradient holds NaN or Inf."""


def clip_grad_norm(arrays: Sequence, max_norm: float, error_if_nonfinite: bool = False) -> float:
    """Scale the gradients of ``arrays`` together so their global L2 norm is at most ``max_norm``.

    Returns the total norm before clipping (float64 accumulation). With NaN/Inf in any gradient
    nothing is scaled and the total norm is NaN (or Inf): scaling would spread the NaN; with
    ``error_if_nonfinite=True`` a NonFiniteGradientError names the arrays instead.
    """
    from gradcheck.measure.stats import gradient_stats

    grads = _grads(arrays)
    if max_norm <= 0 or not math.isfinite(max_norm):
        raise ValueError(f"max_norm must be a positive finite number, got {max_norm!r}")
    stats = gradient_stats(grads)
    bad = [(i, s) for i, s in enumerate(stats) if s.nonfinite]
    if bad:
        _nonfinite(bad, error_if_nonfinite, "clip_grad_norm")
        return math.nan if any(s.nan for _, s in bad) else math.inf
    total = math.sqrt(sum(s.sumsq for s in stats))
    if total > max_norm:
        factor = max_norm / (total + 1e-6)
        for grad in grads:
            _launch_flat("scale", grad, factor)
    return total


def clip_grad_value(arrays: Sequence, limit: float, error_if_nonfinite: bool = False) -> int:
    """Clamp every gradient value of ``arrays`` to [-limit, limit]; NaN stays NaN.

    Returns how many values were changed. NaN/Inf are reported (warning) or raised
    (``error_if_nonfinite=True``, before anything is changed); +-Inf is clamped like any value.
    """
    import warp as wp

    from gradcheck.measure.stats import gradient_stats

    if limit < 0 or not math.isfinite(limit):
        raise ValueError(f"limit must be a non-negative finite number, got {limit!r}")
    grads = _grads(arrays)
    bad = [(i, s) for i, s in enumerate(gradient_stats(grads)) if s.nonfinite]
    if bad:
        _nonfinite(bad, error_if_nonfinite, "clip_grad_value")
    changed = 0
    for grad in grads:
        counter = wp.zeros(1, dtype=wp.int32, device=grad.device)
        _launch_flat("clamp", grad, limit, counter)
        changed += int(counter.numpy()[0])
    return changed


def clip_on_tape(tape, arrays: Sequence, max_norm: float) -> None:
    """Record a gradient-norm clip on ``tape`` at this point: during backward it runs after the
    adjoints of everything recorded later, so the clipped gradients are what flows further back."""
    arrays = list(arrays)
    _grads(arrays)  # fail now, not inside backward
    tape.record_func(backward=lambda: clip_grad_norm(arrays, max_norm), arrays=arrays)


def _grads(arrays: Sequence) -> list:
    grads = []
    for i, array in enumerate(arrays):
        grad = getattr(array, "grad", None)
        if grad is None:
            raise ValueError(f"arrays[{i}] has no gradient buffer; allocate it with requires_grad=True")
        if not grad.is_contiguous:
            raise ValueError(f"arrays[{i}].grad is not contiguous; clip a contiguous gradient buffer")
        grads.append(grad)
    return grads


def _nonfinite(bad, raise_error: bool, where: str) -> None:
    detail = ", ".join(f"arrays[{i}] ({s.nan} NaN, {s.inf} Inf)" for i, s in bad)
    message = f"{where}: non-finite gradient in {detail}; nothing was scaled to hide it"
    if raise_error:
        raise NonFiniteGradientError(message)
    warnings.warn(message, RuntimeWarning, stacklevel=3)


def _launch_flat(kind: str, grad, *args) -> None:
    """Launch the scale/clamp kernel over ``grad`` viewed as a flat array of its scalars."""
    import warp as wp

    from gradcheck.measure.kernels import clamp_kernel, scale_kernel
    from gradcheck.warp_compat import scalar_type, scalars_per_element

    scalar = scalar_type(grad.dtype)
    count = grad.size * scalars_per_element(grad.dtype)
    if not count:
        return
    flat = wp.array(ptr=grad.ptr, dtype=scalar, shape=(count,), device=grad.device)
    kernel = scale_kernel(scalar) if kind == "scale" else clamp_kernel(scalar)
    wp.launch(kernel, dim=count, inputs=[flat, *args], device=grad.device, record_tape=False)
