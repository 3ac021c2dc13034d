"""Reading gradient buffers: per-parameter statistics against pass 1, and nonzero tests.

Values are copied to the host (``numpy()`` is a view on CPU, so copies are taken before the
zero step can clear them). Norms accumulate in float64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gradcheck.trace import ParamPass

# Relative tolerance for "same gradient as pass 1" on CUDA, where float atomics make backward
# nondeterministic. Atomic-order noise is ~1e-7·sqrt(n) relative; accumulation is ~1x per pass.
CUDA_RTOL = 1e-4

NO_GRAD = ParamPass(
    has_grad=False,
    norm=math.nan,
    max_abs=math.nan,
    nonzero=0,
    nonfinite=0,
    equal_to_first=True,
    diff_norm=math.nan,
    coef=math.nan,
)


def equality_tolerance(device: str) -> float:
    """0 (bitwise) on CPU and under wp.config.deterministic; CUDA_RTOL otherwise."""
    if not device.startswith("cuda"):
        return 0.0
    import warp as wp

    mode = getattr(wp.config, "deterministic", None)
    if mode not in (None, False, "not_guaranteed") and str(mode).lower() not in ("none", "not_guaranteed", "off"):
        return 0.0
    return CUDA_RTOL


@dataclass
class FirstPass:
    """Pass-1 gradient of one parameter, kept on the host for comparison."""

    values: object  # numpy array, native dtype
    flat64: object  # float64 ravel
    norm_sq: float


def read_param(array, first: FirstPass | None, tolerance: float) -> tuple[ParamPass, FirstPass | None]:
    """Stats of ``array.grad`` now, compared with ``first`` (None on pass 1)."""
    import numpy as np

    grad = getattr(array, "grad", None)
    if grad is None:
        return NO_GRAD, first
    values = np.array(grad.numpy(), copy=True)
    flat = values.astype(np.float64).ravel()
    finite = np.isfinite(flat)
    nonfinite = int(flat.size - np.count_nonzero(finite))
    norm_sq = float(np.dot(flat, flat))
    norm = math.sqrt(norm_sq) if math.isfinite(norm_sq) else math.nan
    max_abs = float(np.max(np.abs(flat))) if flat.size else 0.0
    nonzero = int(np.count_nonzero(flat))
    if first is None:
        first = FirstPass(values, flat, norm_sq)
        return ParamPass(True, norm, max_abs, nonzero, nonfinite, True, 0.0, 1.0 if norm_sq > 0 else math.nan), first
    if first.flat64.shape != flat.shape:
        return ParamPass(True, norm, max_abs, nonzero, nonfinite, False, math.nan, math.nan), first
    diff = flat - first.flat64
    diff_norm = float(math.sqrt(float(np.dot(diff, diff)))) if np.all(np.isfinite(diff)) else math.nan
    if tolerance == 0.0:
        equal = bool(np.array_equal(values, first.values, equal_nan=True))
    else:
        scale = max(math.sqrt(first.norm_sq), 1e-30)
        equal = bool(diff_norm <= tolerance * scale)
    coef = float(np.dot(flat, first.flat64) / first.norm_sq) if first.norm_sq > 0 else math.nan
    return ParamPass(True, norm, max_abs, nonzero, nonfinite, equal, diff_norm, coef), first


def nonzero_summary(grad) -> tuple[int, float, int] | None:
    """(nonzero scalar values, float64 norm, scalar values) of a buffer, or None when it is all zero."""
    import numpy as np

    values = grad.numpy()
    if not values.any():
        return None
    flat = np.asarray(values, dtype=np.float64).ravel()
    return int(np.count_nonzero(flat)), float(np.sqrt(np.dot(flat, flat))), int(flat.size)
