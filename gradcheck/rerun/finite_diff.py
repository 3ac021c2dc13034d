"""Finite-difference verification of the tape's gradients: fast (directional) and element-wise, noise-aware.

Fast mode (PyTorch fast_mode / JAX check_grads style): k seeded random directions v over all
params together; the tape's directional derivative g·v against a central difference of the loss
along v, two forward rollouts per direction whatever the number of params. Element mode: central
differences on single entries (the largest-gradient ones plus random ones per param family),
naming the worst element. Used automatically when fast mode fails.

A judge that knows its own noise. A float32 rollout's loss is not a smooth function at small scales:
rounding in every step adds computational noise far above the rounding of the final loss (Newton's
cloth, 1,920 steps: sigma ≈ 6e-5 in a loss of 271.6, so a central difference at a step of 1e-4 is off
by ~0.4). So:

1. Each param is perturbed relative to its own scale (its RMS value, 1 for an all-zero array), and the
   first central difference uses eps = 1e-2. When it agrees with the tape, that is the verdict: two
   rollouts, the common case.
2. On a disagreement the loss's noise sigma is measured once per run, Moré & Wild's ECnoise ("Estimating
   computational noise", SIAM J. Sci. Comput. 33(3), 2011): nine equally spaced rollouts along the direction,
   a difference table, and the order at which its levels agree and its entries change sign.
3. Steps are taken from a ladder around 1e-2, only those whose noise error (2 sigma / eps) is well below
   the band being judged, until two neighbouring steps agree within their noise (convergence). Smaller
   steps after a disagreement are not trusted blindly: on noisy programs they make it worse.
4. An agreement counts at the first pair that settles. A disagreement counts only beyond the noise, only when
   three consecutive precise steps agree on it, and only at the smallest steps that can judge it: losses of
   real programs are piecewise smooth (contacts, clamps, look-ups), and two steps across kinks can agree on
   a value that is not the derivative. A direction that never settles is "no verdict", never an error. A direction
   costs at most ~36 rollouts (8-24 of them measure the noise, once per run).
5. Estimates that never settle but all lie far on the other side of zero from the tape are a disagreement too
   (fd_evidence.one_sided; Warp's example_diffray: tape +39.6, FD -34.5, -19.2, -30.5, -22.8 at four steps).

Before any of it, the unperturbed loss must repeat: a forward that is not a function of the params
(state carried between calls) makes every difference meaningless. Forward rollouts run without a tape,
and every param is restored after every rollout, also those the perturbed forward overwrote.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from gradcheck.model.options import FDMode, FDOptions
from gradcheck.model.paths import group_by_family
from gradcheck.model.trace import FDResult, Probe, Step, losses_repeat
from gradcheck.rerun.fd_evidence import ecnoise, one_sided
from gradcheck.warp_compat import is_float_array

FIRST_EPS = 1e-2
# steps tried after a disagreement, nearest to FIRST_EPS first; neighbours in LADDER must agree to converge
LADDER = (3e-1, 1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 3e-4)
NOISE_EPS = 1e-4  # the first ECnoise spacing; then x10 while too flat, /100 when too smooth
NOISE_EPS_MIN, NOISE_EPS_MAX = 1e-6, 1e-2
NOISE_POINTS = 9  # the base point and 8 rollouts
F32_EPS = 1.2e-7
NOISE_MARGIN = 0.5  # a step is usable when its noise error is below this fraction of the error band


@dataclass(frozen=True)
class StateSnapshot:
    """The program's arrays (params aside) as they were when the first pass started, and their copies; or why
    none were kept (``note``)."""

    pairs: tuple = ()  # (array, copy)
    note: str | None = None

    def restore(self) -> None:
        import warp as wp

        for array, copy in self.pairs:
            wp.copy(array, copy)


class Rollouts:
    """Forward rollouts at perturbed param values, each from the same state: the program's state (when it was
    kept) and then every param are restored before every rollout, and the params again after it."""

    def __init__(self, scenario, params: dict, snapshots: dict, state: StateSnapshot | None = None):
        import numpy as np

        self.scenario, self.params, self.snapshots = scenario, params, snapshots
        self.state = state or StateSnapshot()
        self.x0 = {k: np.asarray(snapshots[k].numpy(), dtype=np.float64) for k in params}
        self.count = 0
        self.output_size = 1  # scalars in what forward() returned, at the last rollout

    def loss(self, delta: dict) -> float:
        import numpy as np
        import warp as wp

        # the state first (a copy of it may alias a param: an optimizer's flattened view), then every param from
        # its snapshot, not only the perturbed ones: forward() or after_backward() may have overwritten any of them
        self.state.restore()
        for key, param in self.params.items():
            if key not in delta:
                wp.copy(param, self.snapshots[key])
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

    def central(self, delta: dict, eps: float, sigma: float = 0.0, base: float | None = None) -> Step:
        """The derivative along ``delta`` at step ``eps``, with the noise bound of that estimate: the rounding
        of the float32 loss, or 2 sigma / eps once the loss's noise sigma is known. With ``base`` (the loss at
        the params) also the two one-sided differences, which tell a kink from curvature."""
        up = self.loss({k: eps * d for k, d in delta.items()})
        down = self.loss({k: -eps * d for k, d in delta.items()})
        rounding = 2 * F32_EPS * max(abs(up), abs(down)) / (2 * eps)
        behind, ahead = ((base - down) / eps, (up - base) / eps) if base is not None else (None, None)
        return Step(eps, (up - down) / (2 * eps), max(rounding, 2 * sigma / eps), behind, ahead)

    def noise(self, delta: dict, base: float) -> float | None:
        """sigma of the loss's computational noise along ``delta`` (ECnoise), or None when no spacing gave a
        consistent estimate. Up to three spacings of 8 rollouts each, usually one: from NOISE_EPS, larger while
        the loss does not change at that spacing ("too flat": below its float32 resolution), smaller when no
        order of the table is noise ("too smooth")."""
        import numpy as np

        half = NOISE_POINTS // 2
        h, tried = NOISE_EPS, 0
        while tried < 3 and NOISE_EPS_MIN <= h <= NOISE_EPS_MAX:
            tried += 1
            values = [
                base if i == half else self.loss({k: (i - half) * h * d for k, d in delta.items()})
                for i in range(NOISE_POINTS)
            ]
            sigma, verdict = ecnoise(np.asarray(values, dtype=np.float64))
            if sigma is not None:
                return sigma
            h = h * 10 if verdict == "too flat" else h / 100
        return None


class Judge:
    """Compares the tape's derivative with finite differences along one direction at a time, spending rollouts
    only on disagreements; the loss's noise is measured once, at the first disagreement."""

    def __init__(self, rollouts: Rollouts, base: float, options: FDOptions, sigma: float | None = None):
        """``sigma``: the loss's noise when it is known (one launch: the rounding of its outputs)."""
        self.rollouts, self.base, self.options = rollouts, base, options
        self.sigma: float | None = sigma
        self._sigma_measured = sigma is not None
        self._measured_along: dict | None = None  # the direction the noise was measured along

    def probe(self, label: str, ad: float, delta: dict, floor: float) -> Probe:
        """``floor`` is the size a derivative of this kind typically has, so a direction nearly orthogonal to
        the gradient (or a tiny entry) is not judged against its own near-zero value."""
        first = self.rollouts.central(delta, FIRST_EPS, self.sigma or 0.0, self.base)
        if self._error(ad, first, floor) < self.options.warn and self._precise(ad, first, floor):
            return self._verdict(label, ad, first, floor, True, (first,))
        if ad == 0.0 and first.ahead == 0.0 and first.behind == 0.0:
            # the loss does not move at all along the direction and the tape says so: exact agreement (params the
            # loss does not depend on), not noise; nothing smaller or larger would tell more
            return self._verdict(label, ad, first, floor, True, (first,))
        if not self._sigma_measured:
            self._sigma_measured, self._measured_along = True, delta
            self.sigma = self.rollouts.noise(delta, self.base)
        sigma = self.sigma
        size = max(abs(ad), abs(first.fd), floor, 1e-30)
        if sigma is None:  # no usable noise estimate: only the steps that agree with each other will tell
            usable = LADDER
        else:
            smallest = 2 * sigma / self._resolution(size)
            usable = tuple(h for h in LADDER if h >= smallest)
        first = replace(first, noise=max(first.noise, 2 * (sigma or 0.0) / first.eps))
        steps = {FIRST_EPS: first}
        for eps in sorted(usable, key=lambda h: abs(math.log(h / FIRST_EPS))):
            if eps not in steps:
                steps[eps] = self.rollouts.central(delta, eps, sigma or 0.0, self.base)
            agreed = self._agreeing(ad, steps, size, floor)
            if agreed is not None:
                return self._verdict(label, ad, agreed, floor, True, tuple(steps.values()))
        verdict = self._final(label, ad, steps, size, floor)
        if verdict.converged and verdict.rel_error >= self.options.warn and self._measured_along is not delta:
            # a disagreement is about to be reported, but the noise was measured along another direction, and one
            # ECnoise estimate is good to a factor of ~2: measure it along this one too and keep the larger
            here = self.rollouts.noise(delta, self.base)
            if here is not None and here > (self.sigma or 0.0):
                self.sigma = here
                steps = {e: replace(st, noise=max(st.noise, 2 * here / e)) for e, st in steps.items()}
                verdict = self._final(label, ad, steps, size, floor)
        return verdict

    def _final(self, label: str, ad: float, steps: dict, size: float, floor: float) -> Probe:
        """The verdict once every usable step was tried and none settled on the tape's value."""
        tried = tuple(steps.values())
        agreed = self._agreeing(ad, steps, size, floor)
        if agreed is not None:
            return self._verdict(label, ad, agreed, floor, True, tried)
        limit = self._limit(steps, size)
        if limit is not None:
            kink = self._kink(steps, size)
            return self._verdict(label, ad, limit, floor, kink is None, tried, kink)
        opposed = one_sided(ad, tried)  # unsettled, but all far on the other side of zero: a disagreement
        if opposed is not None:  # unless at a kink, where the tape's side and the average may differ in sign
            kink = self._kink(steps, size)
            return self._verdict(label, ad, opposed, floor, kink is None, tried, kink)
        last = min(tried, key=lambda s: self._error(ad, s, floor))  # the closest estimate, for the record
        return self._verdict(label, ad, last, floor, False, tried)

    def _precise_steps(self, steps: dict, size: float) -> list[Step]:
        """Steps precise enough to judge, largest first: a step whose noise is as large as the derivative agrees
        with anything."""
        return sorted((s for s in steps.values() if s.noise <= self._resolution(size)), key=lambda s: -s.eps)

    def _agree(self, a: Step, b: Step, size: float) -> bool:
        return abs(a.fd - b.fd) <= a.noise + b.noise + NOISE_MARGIN * self.options.warn * size

    def _agreeing(self, ad: float, steps: dict, size: float, floor: float) -> Step | None:
        """The smaller-step estimate of the first two neighbouring precise steps (at most 10x apart) that agree
        within their noise, and with the tape: truncation error changes ~100x over such a pair, so for a smooth
        loss agreement means both are near the limit. An agreement needs only this; a disagreement more
        (``_limit``)."""
        tried = self._precise_steps(steps, size)
        for a, b in zip(tried, tried[1:]):
            if a.eps <= 10.5 * b.eps and self._agree(a, b, size) and self._error(ad, b, floor) < self.options.warn:
                return b
        return None

    def _limit(self, steps: dict, size: float) -> Step | None:
        """The derivative FD converges to as the step shrinks, or None when that is undecided: the evidence a
        disagreement needs. Losses of real programs are only piecewise smooth (contacts, clamps, max, bilinear
        look-ups): two steps that straddle kinks can agree by coincidence on a value that is not the derivative
        (Newton's ball: -0.156 at steps 1e-2 and 3e-2, -0.399 at every step below 3e-3; Warp's fluid: 0.00344 at
        two steps, 0.00362 between them). So the limit is the smallest of three consecutive precise steps that
        agree (a smooth loss's truncation error changes ~10x per step of the ladder: three agreeing estimates
        leave no room for it), and only when no smaller precise step contradicts it."""
        tried = self._precise_steps(steps, size)
        for i in range(len(tried) - 1, 1, -1):
            a, b, c = tried[i - 2], tried[i - 1], tried[i]
            if (
                a.eps <= 10.5 * b.eps
                and b.eps <= 10.5 * c.eps
                and self._agree(a, b, size)
                and self._agree(b, c, size)
                and self._agree(a, c, size)
            ):
                return c if all(self._agree(c, s, size) for s in tried[i + 1 :]) else None
        return None

    def _kink(self, steps: dict, size: float) -> tuple[float, float] | None:
        """(left, right) derivatives when the loss has a kink at the params along this direction, else None.

        For a smooth loss the two one-sided differences differ by f'' eps: the gap shrinks with the step. At a
        kink (a contact exactly at rest, a velocity that puts a semi-Lagrangian back-trace exactly on a grid
        node, max/clamp/floor at its switch) it stays as large at every step: the derivative does not exist,
        the tape returns the derivative of one side, central differences their average, and neither is wrong.
        Decided on the two smallest precise steps: the gap beyond their noise, no smaller than half of the
        larger step's, and large enough to move a verdict."""
        tried = [s for s in self._precise_steps(steps, size) if s.ahead is not None and s.behind is not None]
        if len(tried) < 2:
            return None
        a, b = tried[-2], tried[-1]
        gap_a, gap_b = a.ahead - a.behind, b.ahead - b.behind
        if abs(gap_b) <= 2 * (a.noise + b.noise) + self.options.warn * size or abs(gap_b) < 0.5 * abs(gap_a):
            return None
        return (b.behind, b.ahead)

    def _resolution(self, size: float) -> float:
        """The noise an estimate may carry and still tell an error-band disagreement: half of that band. (A noisier
        estimate could hide an error; a smaller bound would leave long float32 rollouts with no usable step.)"""
        return NOISE_MARGIN * self.options.error * size

    def _precise(self, ad: float, step: Step, floor: float) -> bool:
        return step.noise <= self._resolution(self._size(ad, step, floor))

    @staticmethod
    def _size(ad: float, step: Step, floor: float) -> float:
        """What a disagreement is measured against: the derivative's size, at least its typical size and noise."""
        return max(abs(ad), abs(step.fd), floor, step.noise, 1e-30)

    @classmethod
    def _error(cls, ad: float, step: Step, floor: float) -> float:
        return max(abs(step.fd - ad) - step.noise, 0.0) / cls._size(ad, step, floor)

    def _verdict(self, label, ad, step: Step, floor, converged: bool, steps: tuple, kink=None) -> Probe:
        size = self._size(ad, step, floor)
        return Probe(
            label,
            ad,
            step.fd,
            step.eps,
            self._error(ad, step, floor),
            abs(step.fd - ad),
            step.noise,
            noise_floor=step.noise / size,
            converged=converged,
            steps=steps,
            kink=kink,
        )


def run_fd(
    scenario,
    params: dict,
    snapshots: dict,
    grads: dict,
    options: FDOptions,
    state: StateSnapshot | None = None,
    first_loss: float | None = None,
) -> FDResult:
    """``grads``: key → numpy gradient from the first pass (same shape as the param's numpy view); ``state``: the
    program's arrays as the first pass found them, restored before every rollout; ``first_loss``: that pass's
    loss, which the unperturbed rollout must reproduce."""
    import numpy as np

    mode = options.mode.value
    if options.mode is FDMode.off:
        return FDResult(mode=mode, skipped="--fd off")
    keys = [k for k in params if k in grads and is_float_array(params[k])]
    if not keys:
        return FDResult(mode=mode, skipped="no param with a gradient")
    if any(not np.all(np.isfinite(grads[k])) for k in keys):
        return FDResult(mode=mode, skipped="gradients are not finite (see nonfinite)")
    rollouts = Rollouts(scenario, {k: params[k] for k in keys}, snapshots, state)
    checked = _comparable(rollouts, mode, next(iter(params.values())).device, first_loss)
    if isinstance(checked, FDResult):
        return checked
    base, again = checked
    judge = Judge(rollouts, base, options)
    scale = {k: param_scale(rollouts.x0[k]) for k in keys}
    rng = np.random.default_rng(options.seed)
    worst: list = [None]  # (Probe, delta) of the worst converged disagreement
    directions = _directions(judge, rollouts, grads, keys, scale, rng, options, worst)
    elements = []
    # elements sharpen a directional failure, and may decide where random directions could not (their largest
    # entries have larger derivatives than a random direction sees, so the same noise hides less)
    failed = options.auto_elements and any(p.rel_error >= options.warn or not p.converged for p in directions)
    if options.mode is FDMode.elements or failed:
        elements = _elements(judge, rollouts, grads, keys, scale, rng, options, worst)
    return FDResult(
        mode,
        tuple(directions),
        tuple(elements),
        rollouts.count,
        base,
        None,
        options.warn,
        options.error,
        noise_level=judge.sigma,
        repeat_loss=again,
        restored_arrays=len(rollouts.state.pairs),
        state_note=rollouts.state.note,
        culprit_direction=worst[0][1] if worst[0] else None,
    )


def _comparable(rollouts: Rollouts, mode: str, device, first_loss: float | None) -> tuple[float, float] | FDResult:
    """(loss, loss again) when the unperturbed rollout is a scalar function of the params that reproduces the first
    pass's loss, else the FDResult saying why no comparison can be made."""
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
    again = rollouts.loss({})
    restored = len(rollouts.state.pairs)
    kept = f" (with the {restored} arrays it holds restored)" if restored else ""
    reason = None
    if not _same_loss(base, again, device):
        reason = (
            f"forward() is not a function of the params{kept}: the loss at the same params was {base!r}, "
            f"then {again!r}; a difference quotient would compare two different functions (see stateful-forward)"
        )
    elif first_loss is not None and math.isfinite(first_loss) and not _same_loss(first_loss, base, device):
        reason = (
            f"the loss at the first pass's params{kept} was {base!r}, but the first pass's was {first_loss!r}: "
            "state outside the params changed after it (see stateful-forward), so its gradient is not the derivative "
            "these rollouts would measure"
        )
    if reason is None:
        return base, again
    return FDResult(
        mode=mode,
        rollouts=rollouts.count,
        loss=base,
        repeat_loss=again,
        restored_arrays=restored,
        state_note=rollouts.state.note,
        skipped=reason,
    )


def _directions(judge, rollouts, grads, keys, scale, rng, options, worst: list) -> list[Probe]:
    """Fast mode: random unit directions (in each param's scale)."""
    import numpy as np

    if options.mode is not FDMode.fast:
        return []
    # a random unit direction sees about |g ⊙ s| / sqrt(N) of the (scaled) gradient
    scaled_sq = sum(float(np.sum((grads[k] * scale[k]) ** 2)) for k in keys)
    typical = math.sqrt(scaled_sq / max(sum(grads[k].size for k in keys), 1))
    directions = []
    for d in range(options.directions):
        raw = {k: rng.standard_normal(rollouts.x0[k].shape) for k in keys}
        norm = math.sqrt(sum(float(np.sum(r * r)) for r in raw.values()))
        delta = {k: scale[k] * raw[k] / norm for k in keys}
        ad = sum(float(np.sum(grads[k] * delta[k])) for k in keys)
        directions.append(judge.probe(f"direction {d + 1}", ad, delta, typical))
        worst[0] = _worse(worst[0], directions[-1], delta, options)
    return directions


def _elements(judge, rollouts, grads, keys, scale, rng, options, worst: list) -> list[Probe]:
    """Single entries per family: the largest-gradient ones and a few at random."""
    import numpy as np

    elements = []
    for _fam, members in group_by_family(keys, key=lambda k: k).items():
        # entries 100x smaller than the family's largest are judged against 1% of it
        floor = 1e-2 * max(float(np.max(np.abs(grads[k]))) * scale[k] for k in members)
        for key, index in _pick_elements(members, grads, rng, options.elements):
            delta = {key: np.zeros_like(rollouts.x0[key])}
            delta[key][index] = scale[key]
            ad = float(grads[key][index]) * scale[key]
            probe = judge.probe(_element_label(key, index), ad, delta, floor)
            elements.append(_per_unit(probe, scale[key]))
            worst[0] = _worse(worst[0], probe, delta, options)
    return elements


def _worse(worst: tuple | None, probe: Probe, delta: dict, options: FDOptions) -> tuple | None:
    if not probe.converged or probe.rel_error < options.warn:
        return worst
    return (probe, delta) if worst is None or probe.rel_error > worst[0].rel_error else worst


def _same_loss(first: float, second: float, device) -> bool:
    """Bitwise on CPU (deterministic); on CUDA within float atomics' run-to-run noise."""
    from gradcheck.measure.gradients import equality_tolerance

    return losses_repeat([first, second], equality_tolerance(str(device)))


def _per_unit(probe: Probe, scale: float) -> Probe:
    """An element's Probe in derivative units of the param itself, not along the scaled step."""
    return replace(
        probe,
        ad=probe.ad / scale,
        fd=probe.fd / scale,
        abs_error=probe.abs_error / scale,
        noise=probe.noise / scale,
        steps=tuple(
            replace(s, fd=s.fd / scale, noise=s.noise / scale, behind=_div(s.behind, scale), ahead=_div(s.ahead, scale))
            for s in probe.steps
        ),
        kink=tuple(v / scale for v in probe.kink) if probe.kink else None,
    )


def _div(value: float | None, scale: float) -> float | None:
    return None if value is None else value / scale


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


def param_scale(values) -> float:
    """What a step is relative to: the values' RMS, 1 for an all-zero (or non-finite) array."""
    import numpy as np

    rms = float(np.sqrt(np.mean(values * values))) if values.size else 0.0
    return rms if rms > 0 and math.isfinite(rms) else 1.0
