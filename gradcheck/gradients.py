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
        self._first = None  # float64 values of pass 1, concatenated in that layout
        self._first_norm_sq = None
        self._first_by_key: dict = {}  # key → its pass-1 values, for passes whose layout differs

    def read(self, params: dict) -> dict[str, ParamPass]:
        import numpy as np

        with_grad = {k: a.grad for k, a in params.items() if getattr(a, "grad", None) is not None}
        out = {k: NO_GRAD for k in params if k not in with_grad}
        if not with_grad:
            return out
        keys = list(with_grad)
        chunks = [np.asarray(g.numpy()).reshape(-1) for g in with_grad.values()]
        sizes = np.fromiter((c.size for c in chunks), dtype=np.int64, count=len(chunks))
        flat = np.concatenate(chunks, dtype=np.float64)
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        nonempty = sizes > 0

        def segsum(values):
            sums = np.add.reduceat(values, starts) if values.size else np.zeros(len(keys))
            return np.where(nonempty, sums, 0)

        norm_sq = segsum(flat * flat)
        max_abs = np.where(nonempty, np.maximum.reduceat(np.abs(flat), starts), 0.0) if flat.size else norm_sq * 0
        nonzero = segsum((flat != 0).astype(np.int64))
        nonfinite = segsum((~np.isfinite(flat)).astype(np.int64))
        norms = np.sqrt(np.where(np.isfinite(norm_sq), norm_sq, np.nan))

        layout = (tuple(keys), tuple(sizes.tolist()))
        if self._layout is None:
            self._layout, self._first, self._first_norm_sq = layout, flat.copy(), norm_sq
            self._first_by_key = {k: self._first[a : a + n] for k, a, n in zip(keys, starts, sizes)}
        first, first_norm_sq, comparable = self._aligned_first(layout, keys, sizes)

        diff = flat - first
        diff_sq = segsum(diff * diff)
        dot = segsum(flat * first)
        if self.tolerance == 0.0:  # bitwise (NaN equals NaN): CPU backward is deterministic
            same = (flat == first) | (np.isnan(flat) & np.isnan(first))
            equal = (segsum((~same).astype(np.int64)) == 0) & comparable
        else:
            scale = np.maximum(np.sqrt(first_norm_sq), 1e-30)
            equal = (np.sqrt(diff_sq) <= self.tolerance * scale) & comparable
        with np.errstate(divide="ignore", invalid="ignore"):
            coef = np.where((first_norm_sq > 0) & comparable, dot / first_norm_sq, np.nan)
        diff_norm = np.where(comparable, np.sqrt(np.where(np.isfinite(diff_sq), diff_sq, np.nan)), np.nan)
        for n, key in enumerate(keys):
            out[key] = ParamPass(
                has_grad=True,
                norm=float(norms[n]),
                max_abs=float(max_abs[n]),
                nonzero=int(nonzero[n]),
                nonfinite=int(nonfinite[n]),
                equal_to_first=bool(equal[n]),
                diff_norm=float(diff_norm[n]),
                coef=float(coef[n]),
            )
        return out

    def _aligned_first(self, layout, keys, sizes):
        """Pass-1 values laid out like this pass, and which params can be compared at all."""
        import numpy as np

        if layout == self._layout:
            return self._first, self._first_norm_sq, np.ones(len(keys), dtype=bool)
        # a param lost or changed its gradient buffer since pass 1: align what is comparable, NaN the rest
        parts, comparable = [], []
        for key, size in zip(keys, sizes):
            values = self._first_by_key.get(key)
            ok = values is not None and values.size == size
            parts.append(values if ok else np.full(int(size), np.nan))
            comparable.append(ok)
        first = np.concatenate(parts) if parts else np.zeros(0)
        first_norm_sq = np.array([float(np.dot(p, p)) if ok else np.nan for p, ok in zip(parts, comparable)])
        return first, first_norm_sq, np.array(comparable, dtype=bool)


def nonzero_summary(grad) -> tuple[int, float, int] | None:
    """(nonzero scalar values, float64 norm, scalar values) of a buffer, or None when it is all zero."""
    import numpy as np

    values = grad.numpy()
    if not values.any():
        return None
    flat = np.asarray(values, dtype=np.float64).ravel()
    return int(np.count_nonzero(flat)), float(np.sqrt(np.dot(flat, flat))), int(flat.size)
