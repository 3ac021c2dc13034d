"""Reading gradient buffers: per-parameter statistics against pass 1, and nonzero tests.

Values are copied to the host (``numpy()`` is a view on CPU, so copies are taken before the
zero step can clear them). Norms accumulate in float64.
"""

from __future__ import annotations

import math

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
    """0 (bitwise) on CPU and under a deterministic wp.config.deterministic mode; CUDA_RTOL otherwise."""
    from gradcheck.warp_compat import deterministic_atomics

    if not device.startswith("cuda") or deterministic_atomics():
        return 0.0
    return CUDA_RTOL


class GradientReader:
    """Reads every param's gradient once per pass and compares it with pass 1.

    All params are read together: one float64 concatenation and a handful of segmented numpy
    reductions, instead of a dozen numpy calls per param (a 100-step rollout has 102 params and
    the per-param version cost ~2 ms a pass).
    """

    def __init__(self, tolerance: float):
        self.tolerance = tolerance
        self._layout: tuple | None = None  # (keys, sizes) of pass 1
        self._first = None  # float64 values of pass 1, concatenated
        self._first_norm_sq = None

    def read(self, params: dict) -> dict[str, ParamPass]:
        import numpy as np

        with_grad = {k: a.grad for k, a in params.items() if getattr(a, "grad", None) is not None}
        out = {k: NO_GRAD for k in params if k not in with_grad}
        if not with_grad:
            return out
        keys = list(with_grad)
        chunks = [np.asarray(g.numpy()).reshape(-1) for g in with_grad.values()]
        sizes = np.fromiter((c.size for c in chunks), dtype=np.int64, count=len(chunks))
        flat = np.concatenate(chunks, dtype=np.float64) if chunks else np.zeros(0)
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        nonempty = sizes > 0

        def segsum(values):
            sums = np.add.reduceat(values, starts) if values.size else np.zeros(len(keys))
            return np.where(nonempty, sums, 0)

        norm_sq = segsum(flat * flat)
        absval = np.abs(flat)
        max_abs = np.where(nonempty, np.maximum.reduceat(absval, starts), 0.0) if flat.size else np.zeros(len(keys))
        nonzero = segsum((flat != 0).astype(np.int64))
        nonfinite = segsum((~np.isfinite(flat)).astype(np.int64))
        norms = np.where(np.isfinite(norm_sq), np.sqrt(np.where(np.isfinite(norm_sq), norm_sq, 0)), np.nan)

        layout = (tuple(keys), tuple(sizes.tolist()))
        if self._layout is None:
            self._layout, self._first, self._first_norm_sq = layout, flat.copy(), norm_sq
            for n, key in enumerate(keys):
                coef = 1.0 if norm_sq[n] > 0 else math.nan
                out[key] = ParamPass(
                    True, float(norms[n]), float(max_abs[n]), int(nonzero[n]), int(nonfinite[n]), True, 0.0, coef
                )
            return out

        if layout != self._layout:  # params changed shape or set since pass 1: nothing to compare
            for n, key in enumerate(keys):
                out[key] = ParamPass(
                    True,
                    float(norms[n]),
                    float(max_abs[n]),
                    int(nonzero[n]),
                    int(nonfinite[n]),
                    False,
                    math.nan,
                    math.nan,
                )
            return out

        first = self._first
        diff = flat - first
        diff_sq = segsum(diff * diff)
        dot = segsum(flat * first)
        if self.tolerance == 0.0:  # bitwise (NaN equals NaN): CPU backward is deterministic
            same = (flat == first) | (np.isnan(flat) & np.isnan(first))
            equal = segsum((~same).astype(np.int64)) == 0
        else:
            scale = np.maximum(np.sqrt(self._first_norm_sq), 1e-30)
            equal = np.sqrt(diff_sq) <= self.tolerance * scale
        for n, key in enumerate(keys):
            fn = self._first_norm_sq[n]
            coef = float(dot[n] / fn) if fn > 0 else math.nan
            diff_norm = math.sqrt(diff_sq[n]) if math.isfinite(diff_sq[n]) else math.nan
            out[key] = ParamPass(
                True,
                float(norms[n]),
                float(max_abs[n]),
                int(nonzero[n]),
                int(nonfinite[n]),
                bool(equal[n]),
                diff_norm,
                coef,
            )
        return out


def nonzero_summary(grad) -> tuple[int, float, int] | None:
    """(nonzero scalar values, float64 norm, scalar values) of a buffer, or None when it is all zero."""
    import numpy as np

    values = grad.numpy()
    if not values.any():
        return None
    flat = np.asarray(values, dtype=np.float64).ravel()
    return int(np.count_nonzero(flat)), float(np.sqrt(np.dot(flat, flat))), int(flat.size)
