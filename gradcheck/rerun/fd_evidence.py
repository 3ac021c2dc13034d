"""What finite-difference estimates say by themselves, apart from the rollouts that produced them: the loss's
computational noise (ECnoise, from a row of equally spaced losses) and one-sided evidence against the tape (from the
central differences at every step tried). Pure numerics on numbers and Steps, so the judge's rules read apart from
the machinery that runs the program (gradcheck.rerun.finite_diff)."""

from __future__ import annotations

import math

from gradcheck.model.trace import Step

ONE_SIDED_STEPS = 3  # finite estimates a one-sided disagreement needs (as many as a converged one)


def one_sided(ad: float, steps) -> Step | None:
    """The estimate closest to the tape when the steps tried disagree with it one-sidedly, else None.

    Three agreeing steps are the usual evidence of a disagreement; noise or non-smoothness can scatter the
    estimates so that no three agree, and yet every one of them says the tape is wrong. That holds when, over at
    least ONE_SIDED_STEPS finite estimates:

    - each has the sign opposite to the tape's and is beyond its own noise bound (its sign is not noise);
    - the gap between the tape and the estimate closest to it exceeds the spread of the estimates (max - min)
      and the largest noise bound of any of them: no estimate, and nothing between them, is near the tape.

    Why a right tape does not meet it: with every estimate on one side of the tape, gap > spread means the largest
    error of an estimate is less than twice the smallest, and each error exceeds its noise bound. A right tape's
    estimates err by truncation (~eps^2, ~eps past a kink, ~1/eps across a jump) or by noise (below its bound but
    for a ~3-sigma event), and truncation errors differ far more than 2x over steps 3-10x apart. An error about the
    same at every step is what a tape computing another derivative gives, or a kink at the params (the caller
    rules that out).
    The closest estimate is what the verdict reports, so the error is the smallest the evidence allows. A tape
    value of exactly 0 has no sign: not this rule's business. Steps whose estimate is not finite are left out."""
    finite = [s for s in steps if math.isfinite(s.fd) and math.isfinite(s.noise)]
    if not (math.isfinite(ad) and ad != 0.0) or len(finite) < ONE_SIDED_STEPS:
        return None
    if any(s.fd * ad >= 0.0 or abs(s.fd) <= s.noise for s in finite):
        return None
    closest = min(finite, key=lambda s: abs(s.fd - ad))
    gap = abs(closest.fd - ad)
    spread = max(s.fd for s in finite) - min(s.fd for s in finite)
    noise = max(s.noise for s in finite)
    return closest if gap > spread and gap > noise else None


def ecnoise(values) -> tuple[float | None, str]:
    """Moré & Wild's noise estimate from f at equally spaced points: (sigma or None, why).

    The k-th differences of a smooth function shrink like h^k, those of noise grow like sqrt(binom(2k, k)):
    scaled by gamma_k = (k!)^2 / (2k)!, noise gives the same level at every order. sigma is the level of the
    first order whose next two agree with it within a factor 4 and whose differences change sign.
    ``why`` is "ok", "too flat" (differences mostly exactly zero: the spacing is below the resolution) or
    "too smooth" (no order is noise-dominated: the spacing is too large)."""
    import numpy as np

    diffs = np.diff(values)
    if np.count_nonzero(diffs) <= len(diffs) // 2:
        return None, "too flat"
    levels, signs = [], []
    for k in range(1, len(values) - 2):
        if k > 1:
            diffs = np.diff(diffs)
        gamma = math.factorial(k) ** 2 / math.factorial(2 * k)
        levels.append(math.sqrt(gamma * float(np.mean(diffs * diffs))))
        signs.append(bool(np.any(diffs > 0) and np.any(diffs < 0)))
    for k in range(len(levels) - 2):
        trio = levels[k : k + 3]
        if signs[k] and min(trio) > 0 and max(trio) <= 4 * min(trio):
            return levels[k], "ok"
    return None, "too smooth"
