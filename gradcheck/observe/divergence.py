"""Whether a training program's loss and gradients are growing together, update after update: the evidence that
tells an optimizer diverging from a steep objective (gradcheck.checks.explosion judges it).

A gradient descent step past 2/L overshoots the minimum by more than it started from: every update lands further
out, so the loss, the gradient and the next update all grow geometrically until they overflow. A penalty switching
on makes the loss and gradient jump once; a line search or a warm-up grows a few steps and falls again; a program
that maximises its objective (an ascent step, along +g) means its loss to grow. Only the first is a bug, and only
the updates tell it apart: so, per gradient, this keeps the run of *consecutive* backwards on which both the loss
and the gradient norm grew, and, once that run is two backwards long, what the program's own update did between
two backwards: ``x_next - x`` against the gradient ``g`` the update followed (a copy of ``x`` and ``g`` right after
the backward, compared with ``x`` right after the next one). That sees any update, a launch, a host assignment or a
torch optimizer writing the array, and the gradient before the optimizer could touch it. A normal training loop,
whose loss falls, never pays for the copies; a run that falls again is forgotten.

Fed after each audited backward of a program that trains (never under ``gradcheck run``, whose passes restore the
params); while a run is under way the cadence audits every backward (``following``), so a divergence that starts
late in a long program is still seen update by update.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from gradcheck.model.growth import GrowthRun, UpdateStep

WATCH_FROM = 2  # growing steps after which each update is measured (copies of x and g): growth pays, nothing else
MAX_COPIED = 1 << 22  # values per param copied to measure its update (16 MiB of float32): larger ones are not


@dataclass
class _Point:
    index: int
    loss: float
    norm: float


@dataclass
class _Copy:
    index: int
    values: object  # float64 copy of x right after the backward
    grad: object  # float64 copy of g


class _Gradient:
    def __init__(self) -> None:
        self.last: _Point | None = None
        self.run: GrowthRun | None = None
        self.ended: GrowthRun | None = None  # a run that ended in NaN/Inf: the divergence's last word
        self.copy: _Copy | None = None


class GrowthWatch:
    """``after_backward(...)`` after every audited backward; ``run(key)`` the frozen evidence at the end."""

    def __init__(self) -> None:
        self._gradients: dict[str, _Gradient] = {}
        self._growing: set[str] = set()  # keys whose run is under way (read before every unaudited backward)

    @property
    def following(self) -> bool:
        """Some gradient grew with the loss on the last backward, its updates (if measured yet) as a divergence's
        do: the next backward is audited too."""
        return bool(self._growing)

    def run(self, key: str) -> GrowthRun | None:
        g = self._gradients.get(key)
        if g is None:
            return None
        # a run under way at the end, or one that ended in NaN/Inf: the longer (a later short rise does not hide a
        # divergence that blew up, nor an early NaN a divergence that came after)
        runs = [r for r in (g.run, g.ended) if r is not None]
        return max(runs, key=lambda r: r.steps, default=None)

    def after_backward(self, index: int, loss: float | None, stats: dict, arrays: dict, sites: dict) -> None:
        """``stats``: key → the gradient's statistics right after backward ``index``; ``arrays``: key → the
        arrays (params and leaves: a program may update a leaf on the host) whose values and gradients may be
        copied; ``sites``: key → the line of the launch seen updating it, if any."""
        growing = set()
        for key, s in stats.items():
            if s is None:
                continue
            g = self._gradients.get(key)
            if g is None:
                g = self._gradients[key] = _Gradient()
            array = arrays.get(key)
            step = _measure(g.copy, index, array) if g.copy is not None else None
            g.copy = None
            _advance(g, index, loss, s.norm, bool(s.nonfinite), step)
            if g.run is not None and g.run.update_site is None and sites.get(key):
                g.run = replace(g.run, update_site=sites[key])
            if g.run is not None and _may_diverge(g.run):
                growing.add(key)
                if g.run.steps >= WATCH_FROM and array is not None:
                    g.copy = _copy(index, array)
        self._growing = growing  # a gradient this backward did not measure cannot be growing on it


def _may_diverge(run: GrowthRun) -> bool:
    """Every update measured so far stepped against the gradient and past the minimum, each larger than the last. A
    run that stepped along it (ascent), short of the minimum, or whose steps stopped growing (a bounded step, Adam's)
    is no divergence: it is neither
    followed past the audit cadence nor copied any more (its growth is kept, for the report to say so)."""
    if run.measured == 0 and run.steps > WATCH_FROM:
        return False  # its updates could not be measured (too large to copy, unreadable): following cannot judge it
    return run.ascent == 0 and run.descent == run.measured == run.overshoots and run.sizes_grew


def _advance(g: _Gradient, index: int, loss: float | None, norm: float, nonfinite: bool, step) -> None:
    last, now = g.last, None
    finite = loss is not None and math.isfinite(loss) and math.isfinite(norm) and not nonfinite
    if finite:
        now = _Point(index, loss, norm)
    g.last = now
    follows = last is not None and index == last.index + 1
    if not follows:
        g.run = None
        return
    if not finite:  # NaN/Inf right after a run: it never recovered
        if loss is not None and g.run is not None:
            g.ended, g.run = replace(g.run, nonfinite_at=index), None
        else:
            g.run = None
        return
    if not (now.loss > last.loss and now.norm > last.norm):
        g.run = None  # it fell: a line search backtracked, a warm-up ended, or nothing grew
        return
    run = g.run or GrowthRun(last.index, last.index, (last.loss, last.loss), (last.norm, last.norm))
    run = replace(run, end=index, losses=(run.losses[0], now.loss), norms=(run.norms[0], now.norm))
    g.run = _with_step(run, step) if step is not None else run


def _with_step(run: GrowthRun, step: UpdateStep) -> GrowthRun:
    grew = run.last_update is None or step.size > run.last_update.size
    return replace(
        run,
        measured=run.measured + 1,
        descent=run.descent + (step.along < 0),
        ascent=run.ascent + (step.along > 0),
        sizes_grew=run.sizes_grew and grew,
        overshoots=run.overshoots + (step.turn is not None and step.turn < 0),
        first_update=run.first_update or step,
        last_update=step,
    )


def _copy(index: int, array) -> _Copy | None:
    """x and g right after backward ``index``, in float64, before the program's update touches either."""
    from gradcheck.measure.liveness import readable
    from gradcheck.warp_compat import is_float_array

    grad = getattr(array, "grad", None)
    if grad is None or not is_float_array(array) or not readable(array) or not readable(grad):
        return None
    if array.size > MAX_COPIED:
        return None
    return _Copy(index, _host(array), _host(grad))


def _measure(copy: _Copy, index: int, array) -> UpdateStep | None:
    """The update between the copied backward and backward ``index`` (the next one), or None (not comparable)."""
    import numpy as np

    from gradcheck.measure.liveness import readable

    if array is None or copy.index != index - 1 or not readable(array):
        return None
    moved = _host(array) - copy.values
    if moved.shape != copy.grad.shape:
        return None
    scale = float(np.linalg.norm(copy.grad))
    if not (scale > 0 and math.isfinite(scale)) or not np.isfinite(moved).all():
        return None
    return UpdateStep(
        copy.index, float(np.linalg.norm(moved)), float(np.vdot(moved, copy.grad)) / scale, _turn(copy.grad, array)
    )


def _turn(before, array) -> float | None:
    """The cosine between the gradient the update followed and the one backward just left: below 0 the update
    stepped past the minimum along it (the next gradient points back), what a step past 2/L does every time; a
    target that moves away or a penalty that stiffens leaves the gradient pointing the same way."""
    import numpy as np

    from gradcheck.measure.liveness import readable

    grad = getattr(array, "grad", None)
    if grad is None or not readable(grad):
        return None
    now = _host(grad)
    norms = float(np.linalg.norm(now)) * float(np.linalg.norm(before))
    if now.shape != before.shape or not (norms > 0 and math.isfinite(norms)):
        return None
    return float(np.vdot(now, before)) / norms


def _host(array):
    import numpy as np

    return np.array(array.numpy(), dtype=np.float64).reshape(-1)
