"""Finite-difference verification of the tape's gradients: fast (directional) and element-wise.

Fast mode (PyTorch fast_mode / JAX check_grads style): k seeded random directions v over all
params together; the tape's directional derivative g·v against a central difference of the loss
along v, two forward rollouts per direction whatever the number of params. Element mode: central
differences on single entries (the largest-gradient ones plus random ones per param family),
naming the worst element. Used automatically when fast mode fails.

Float32-aware: each param is perturbed relative to its own scale (its RMS value, 1 for an all-zero
array), so inputs ~1e3 get steps ~10 and not a fixed 1e-4 that float32 cannot represent; the loss
difference is taken in float64; the rounding of the float32 loss is subtracted from the error as
noise; a disagreement at eps = 1e-2 is re-measured at 1e-3 and counts only if it persists (large
steps suffer truncation, small steps round-off). Forward rollouts run without a tape, and every
param is restored after every perturbation.
"""

from __future__ import annotations

import math

from gradcheck.model.options import FDMode, FDOptions
from gradcheck.model.paths import group_by_family
from gradcheck.model.trace import FDResult, Probe
from gradcheck.probes.warp_compat import is_float_array

EPS = (1e-2, 1e-3)
F32_EPS = 1.2e-7


class _Rollouts:
    """Forward rollouts at perturbed param values, restoring every param afterwards."""

    def __init__(self, scenario, params: dict, snapshots: dict):
        import numpy as np

        self.scenario, self.params, self.snapshots = scenario, params, snapshots
        self.x0 = {k: np.asarray(snapshots[k].numpy(), dtype=np.float64) for k in params}
        self.count = 0
        self.output_size = 1  # scalars in what forward() returned, at the last rollout

    def loss(self, delta: dict) -> float:
        import numpy as np
        import warp as wp

        try:
            for key, d in delta.items():
                arr = self.params[key]
                arr.assign(wp.array((self.x0[key] + d).astype(arr.numpy().dtype), dtype=arr.dtype, device=arr.device))
            out = self.scenario.forward()
            wp.synchronize_device(out.device)
            self.count += 1
            values = np.asarray(out.numpy(), dtype=np.float64).reshape(-1)
            self.output_size = values.size
            return float(values[0])
        finally:
            for key in delta:
                wp.copy(self.params[key], self.snapshots[key])

    def central(self, delta: dict, eps: float) -> tuple[float, float]:
        """(derivative along delta, float32 rounding noise of that estimate)."""
        up = self.loss({k: eps * d for k, d in delta.items()})
        down = self.loss({k: -eps * d for k, d in delta.items()})
        noise = 2 * F32_EPS * max(abs(up), abs(down)) / (2 * eps)
        return (up - down) / (2 * eps), noise


def _compare(label: str, ad: float, rollouts: _Rollouts, delta: dict, options: FDOptions, floor: float) -> Probe:
    """Relative error against max(|AD|, |FD|, floor): ``floor`` is the size a derivative of this kind
    typically has, so a direction nearly orthogonal to the gradient (or a tiny entry) is not judged
    against its own near-zero value."""
    best = None
    for eps in EPS:
        fd, noise = rollouts.central(delta, eps)
        diff = abs(fd - ad)
        rel = max(diff - noise, 0.0) / max(abs(ad), abs(fd), floor, noise, 1e-30)
        probe = Probe(label, ad, fd, eps, rel, diff, noise)
        if best is None or probe.rel_error < best.rel_error:
            best = probe
        if best.rel_error < options.warn:
            break  # agreement at the first step: no need to separate truncation from round-off
    return best


def run_fd(scenario, params: dict, snapshots: dict, grads: dict, options: FDOptions) -> FDResult:
    """``grads``: key → numpy gradient from a clean pass (same shape as the param's numpy view)."""
    import numpy as np

    mode = options.mode.value
    if options.mode is FDMode.off:
        return FDResult(mode=mode, skipped="--fd off")
    keys = [k for k in params if k in grads and is_float_array(params[k])]
    if not keys:
        return FDResult(mode=mode, skipped="no param with a gradient")
    if any(not np.all(np.isfinite(grads[k])) for k in keys):
        return FDResult(mode=mode, skipped="gradients are not finite (see nonfinite)")
    rollouts = _Rollouts(scenario, {k: params[k] for k in keys}, snapshots)
    base = rollouts.loss({})
    if rollouts.output_size != 1:
        # a scenario with its own backward may return any output and seed it with grads=...: there is no
        # scalar whose difference quotient the gradient could be compared with
        return FDResult(
            mode=mode,
            skipped=f"forward() returned {rollouts.output_size} values, not a scalar loss; return the scalar whose "
            "gradient backward computes to get a finite-difference check",
        )
    if not math.isfinite(base):
        return FDResult(mode=mode, skipped="the loss is not finite")
    scale = {k: _scale(rollouts.x0[k]) for k in keys}
    rng = np.random.default_rng(options.seed)

    # a random unit direction sees about |g ⊙ s| / sqrt(N) of the (scaled) gradient
    scaled_sq = sum(float(np.sum((grads[k] * scale[k]) ** 2)) for k in keys)
    count = sum(grads[k].size for k in keys)
    typical = math.sqrt(scaled_sq / max(count, 1))
    directions = []
    if options.mode is FDMode.fast:
        for d in range(options.directions):
            raw = {k: rng.standard_normal(rollouts.x0[k].shape) for k in keys}
            norm = math.sqrt(sum(float(np.sum(r * r)) for r in raw.values()))
            delta = {k: scale[k] * raw[k] / norm for k in keys}
            ad = sum(float(np.sum(grads[k] * delta[k])) for k in keys)
            directions.append(_compare(f"direction {d + 1}", ad, rollouts, delta, options, typical))

    elements = []
    failed = options.auto_elements and any(p.rel_error >= options.warn for p in directions)
    if options.mode is FDMode.elements or failed:
        for _fam, members in group_by_family(keys, key=lambda k: k).items():
            # entries 100x smaller than the family's largest are judged against 1% of it
            floor = 1e-2 * max(float(np.max(np.abs(grads[k]))) * scale[k] for k in members)
            for key, index in _pick_elements(members, grads, rng, options.elements):
                delta = {key: np.zeros_like(rollouts.x0[key])}
                delta[key][index] = scale[key]
                ad = float(grads[key][index]) * scale[key]
                probe = _compare(_element_label(key, index), ad, rollouts, delta, options, floor)
                # report the element derivative itself (per unit of the param), not along the scaled step
                elements.append(
                    Probe(
                        probe.label,
                        probe.ad / scale[key],
                        probe.fd / scale[key],
                        probe.eps,
                        probe.rel_error,
                        probe.abs_error / scale[key],
                        probe.noise / scale[key],
                    )
                )
    return FDResult(mode, tuple(directions), tuple(elements), rollouts.count, base, None, options.warn, options.error)


def _pick_elements(members: list[str], grads: dict, rng, k: int):
    """The k largest-|g| entries of a family plus k random ones (deduplicated), as (key, index)."""
    import numpy as np

    candidates = []
    for key in members:
        flat = np.abs(grads[key]).ravel()
        top = np.argpartition(-flat, k)[:k] if flat.size > k else np.arange(flat.size)
        candidates += [(float(flat[i]), key, int(i)) for i in top]
    chosen = [(key, i) for _, key, i in sorted(candidates, key=lambda c: -c[0])[:k]]
    sizes = np.array([grads[key].size for key in members], dtype=np.float64)
    for _ in range(k * 4):
        if len(chosen) >= 2 * k or not sizes.sum():
            break
        key = members[int(rng.choice(len(members), p=sizes / sizes.sum()))]
        pick = (key, int(rng.integers(grads[key].size)))
        if pick not in chosen:
            chosen.append(pick)
    return [(key, np.unravel_index(i, grads[key].shape)) for key, i in chosen]


def _element_label(key: str, index: tuple) -> str:
    return key + "".join(f"[{int(i)}]" for i in index)


def _scale(values) -> float:
    import numpy as np

    rms = float(np.sqrt(np.mean(values * values))) if values.size else 0.0
    return rms if rms > 0 and math.isfinite(rms) else 1.0
