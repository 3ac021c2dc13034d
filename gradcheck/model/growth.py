"""A param's loss and gradient growing together over a training run, with the updates between them: the frozen
evidence gradcheck.observe.divergence keeps and gradcheck.checks.explosion judges (a diverging optimizer, or a
steep or maximised objective). Plain data, like gradcheck.model.trace, which carries it on each ParamTrace."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class UpdateStep:
    """What the program's own update did to a param between two consecutive backwards: ``x_next - x`` against the
    gradient of the first (gradcheck.observe.divergence). ``along`` < 0: a descent step (it moved against the
    gradient, as a minimiser does); > 0: an ascent step (the program maximises its objective)."""

    backward: int  # the backward whose gradient the update followed
    size: float  # ||x_next - x||
    along: float  # <x_next - x, g> / ||g||: the step's component along the gradient
    # <g_next, g> / (||g_next|| ||g||): below 0 the step crossed the minimum along the gradient (an overshoot: the
    # next gradient points back); None when the next gradient could not be read
    turn: float | None = None


@dataclass(frozen=True)
class GrowthRun:
    """A param's latest run of consecutive backwards on which the loss and the param's gradient norm both grew,
    each more than the last (gradcheck.observe.divergence): the evidence that tells an optimizer diverging (descent
    steps that overshoot, each larger than the last) from a steep objective, a maximised one, or growth that
    recovered (a run that ends in a falling loss is forgotten: only the run still under way at the end, or the one
    that ended in NaN/Inf, is kept)."""

    start: int  # the backward the growth started from: the update after it was the first to make the loss grow
    end: int  # the last backward of the run
    losses: tuple[float, float]  # the loss at start and at end
    norms: tuple[float, float]  # the gradient norm at start and at end
    measured: int = 0  # updates of the run measured (from its third backward on: only growth pays for it)
    descent: int = 0  # of them, steps against the gradient
    ascent: int = 0  # of them, steps along it
    sizes_grew: bool = True  # every measured update was larger than the one before
    overshoots: int = 0  # measured updates after which the gradient pointed back (UpdateStep.turn < 0)
    first_update: UpdateStep | None = None
    last_update: UpdateStep | None = None
    nonfinite_at: int | None = None  # the backward right after the run whose loss or gradient was NaN/Inf
    update_site: str | None = None  # file:line of the launch seen updating the param (None: not seen as a launch)

    @property
    def steps(self) -> int:
        """Consecutive updates after which both the loss and the gradient grew."""
        return self.end - self.start
