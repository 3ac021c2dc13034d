"""Reading each param's gradient once a pass, on the device: its statistics, compared with its first pass.

Pass k's gradient against pass 1's is the accumulation evidence, so the first gradient stays on the device as a
copy and later passes are compared with it in the statistics launch (gradcheck.measure.stats): a few scalars per
param reach the host, never the values. Bitwise on CPU; within CUDA_RTOL on CUDA. Norms accumulate in float64.
"""

from __future__ import annotations

import math
from dataclasses import replace

from gradcheck.measure.stats import GradStats, StatsPlan
from gradcheck.model.trace import ParamPass

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
    """Reads every param's gradient once per pass, on the device, and compares it with its first pass.

    The first pass's gradient is kept as a device copy; later passes get the dot product, the
    squared difference and the bit-level difference count against it from the same kernel that
    computes the norm (gradcheck.measure.stats), so only a few scalars per param reach the host.
    """

    def __init__(self, tolerance: float, compare: bool = True):
        self.tolerance = tolerance
        self.compare = compare  # keep each gradient's first copy to compare with (pointless when params move)
        self._refs: dict[str, tuple[object, float]] = {}  # key → (device copy of the first gradient, its sumsq)
        self._pending: dict[str, tuple[object, float]] = {}  # key → the latest measured gradient of a key with no ref
        self._fresh: set[str] = set()  # keys whose reference the last commit() took
        self._measure_plan = StatsPlan()
        self._readout_plan = StatsPlan()

    def references(self) -> dict:
        """key → device copy of the param's first measured gradient."""
        return {key: ref for key, (ref, _sumsq) in self._refs.items()}

    def measure(self, params: dict) -> dict[str, GradStats | None]:
        """Stats of each param's gradient now (None: no .grad), against its first-pass copy.

        A param with no reference yet keeps a copy of this gradient: the last one measured before ``commit()`` (the
        end of the first pass, which may run several backwards) becomes its reference (``stats.dot`` stays None).
        """
        import warp as wp

        keys = [k for k, a in params.items() if getattr(a, "grad", None) is not None]
        grads = [params[k].grad for k in keys]
        refs = []
        for key, grad in zip(keys, grads):
            ref = self._refs.get(key)
            refs.append(
                ref[0] if ref is not None and ref[0].shape == grad.shape and ref[0].dtype == grad.dtype else None
            )
        stats = dict(zip(keys, self._measure_plan.table(grads, refs).rows())) if keys else {}
        for key, grad in zip(keys, grads):
            if self.compare and key not in self._refs:
                self._pending[key] = (wp.clone(grad, requires_grad=False), stats[key].sumsq)
        return {k: stats.get(k) for k in params}

    def commit(self) -> None:
        """The pass ended: gradients measured for the first time become their own references."""
        self._fresh = set(self._pending)
        self._refs.update(self._pending)
        self._pending = {}

    def readout(self, params: dict, plan: StatsPlan | None = None) -> dict[str, GradStats | None]:
        """Stats again (checksums), e.g. after after_backward(): what the user's loop reads."""
        plan = plan or self._readout_plan
        keys = [k for k, a in params.items() if getattr(a, "grad", None) is not None]
        stats = dict(zip(keys, plan.table([params[k].grad for k in keys]).rows())) if keys else {}
        return {k: stats.get(k) for k in params}

    def record(
        self,
        key: str,
        stats: GradStats | None,
        readout: GradStats | None = None,
        clipped: GradStats | None = None,
        index: int = 0,
    ) -> ParamPass:
        """``key``'s gradient this pass as evidence; ``index``: the pass (iteration) it was read on."""
        if stats is None:
            return NO_GRAD if not index else replace(NO_GRAD, index=index)
        ref = self._refs.get(key)
        ref_sumsq = ref[1] if ref is not None else math.nan
        if stats.dot is None:  # first pass of this param, or its buffer changed shape: nothing to compare
            first = key in self._fresh or not self.compare  # not comparing: nothing differs from anything
            equal, diff_norm = (True, 0.0) if first else (False, math.nan)
            coef = (1.0 if stats.sumsq > 0 else math.nan) if first else math.nan
        else:
            diff_norm = math.sqrt(stats.diffsq) if math.isfinite(stats.diffsq) else math.nan
            if self.tolerance == 0.0:  # bitwise (NaN equals NaN): CPU backward is deterministic
                equal = stats.differ == 0
            else:
                equal = diff_norm <= self.tolerance * max(math.sqrt(ref_sumsq), 1e-30)
            coef = stats.dot / ref_sumsq if ref_sumsq > 0 else math.nan
        return ParamPass(
            has_grad=True,
            norm=stats.norm,
            max_abs=stats.max_abs,
            nonzero=stats.nonzero,
            nonfinite=stats.nonfinite,
            equal_to_first=bool(equal),
            diff_norm=diff_norm,
            coef=coef,
            nan=stats.nan,
            inf=stats.inf,
            checksum=stats.checksum,
            readout_norm=readout.norm if readout is not None else None,
            readout_checksum=readout.checksum if readout is not None else None,
            clipped_norm=clipped.norm if clipped is not None else None,
            index=index,
        )
