"""explosion: a gradient norm above ``--max-norm``, an optimizer diverging, or a gradient that grows by orders of
magnitude along an indexed family (``controls[0..T]``): backpropagation through a long horizon amplifying the
gradient step after step (chaotic dynamics, stiff contacts), not a planted bug.

Three rules, each read off the program's own evidence:

- **divergence** (a program that trains): the loss, a param's gradient norm and the program's own update of it all
  grew on at least ``STEPS`` consecutive updates (five backwards), the updates stepping against the gradient
  (descent) and past the minimum (the next gradient points back), with no recovery by the end of the run or an end
  in NaN/Inf (gradcheck.observe.divergence): a step size past the stable range. An error, whatever the norm. The same run stepping *along* the gradient is a program maximising its
  objective, whose loss is meant to grow: no verdict.
- **a --max-norm the user gave** is a promise: a norm above it is an error whatever the loss did.
- **the default --max-norm**: a norm above it is an error, with one exception: when the gradient grew only as much
  as the loss did (its norm relative to the loss stayed within ``TRACKS`` of what it was on the earlier backwards),
  the objective got steep, not the backward: a penalty switching on (Newton's drone MPC jumps from 15 to 3.6e6
  when a sampled trajectory meets its 1e4 collision penalty, and so does its loss). That is an info.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gradcheck.model.evidence import Mark, Measure, Record
from gradcheck.model.findings import Finding, Severity
from gradcheck.model.growth import GrowthRun
from gradcheck.model.options import DEFAULT_CHECKS, CheckOptions
from gradcheck.model.origins import first_origin, origin_evidence, origin_mark, origin_text
from gradcheck.model.paths import group_by_family
from gradcheck.model.sites import short_site
from gradcheck.model.trace import NormSample, ParamTrace, Trace

NAME = "explosion"
SUMMARY = (
    "gradient norms must stay below --max-norm, a training loop must not diverge, and gradients must not grow by "
    "orders of magnitude along the horizon"
)

EXPLAIN = """
What it means: a gradient norm exceeds --max-norm, a training loop diverges (its loss, gradient and updates grow
update after update), or a gradient grows by orders of magnitude along the horizon (controls[0] >> controls[T]).

Evidence and severity:
- Divergence (exec, audit(): a program that trains): over at least 5 consecutive backwards (the 4 updates of the
  program's own optimizer between them) the loss grew, a param's gradient norm grew, and the update of that param
  (x after the next backward minus x at this one, measured once the growth is two backwards old) grew, stepped
  against the gradient (descent) and past the minimum along it (the next gradient points back: an overshoot); the
  loss grew at least 10x and the gradient 3x over the run, and it never fell again before the program ended (or it
  ended in NaN/Inf): an error, whatever the norm, naming the backward whose update started it and the launch seen
  updating the param. A param updated on the host (x.assign(...), no update launch) is judged too: its measured
  steps show the program trains it. While the loss and a gradient grow, every backward is audited, so a late
  divergence is seen update by update. No verdict: the same growth with updates along the gradient (gradient
  ascent: the program maximises its objective), or with steps that land short of the minimum (a penalty stiffened
  every iteration, a target moving away: the gradient keeps its direction); with updates gradcheck could not
  measure, an info. A run that falls again (a line search backtracking, a warm-up) is forgotten.
- A --max-norm you give (run, exec, blame; max_norm= to gradcheck.check or gradcheck.audit) is a promise: any param
  norm above it is an error, whatever the loss did.
- The default --max-norm (1e6): a norm above it is an error, unless the gradient only grew as the loss did: if
  |g| / |loss| at the peak is within 10x of its median over the earlier backwards, the objective got steep (a
  penalty switching on once, as in Newton's drone MPC), not the backward: an info; so is a norm above it reached
  by gradient ascent. A first gradient already above it has nothing to be compared with: an error.
- Growth by --growth (1e4) across an indexed family is a warning.
Under run the params are restored every pass, so no update is seen: the scenario form of a diverging loop is its
gradient above --max-norm.

Common causes: a learning rate or step size past the stable range (gradient descent needs a step below 2/L, L
the loss's curvature), chaotic dynamics (double pendulum), stiff contacts, long horizons, a bug that multiplies
the adjoint every step.

Where it crosses the line: the first launch of backward (kernel, line, step of a rollout) whose adjoint output
exceeds --max-norm, found by bisection over the recorded launches at the first backward that shows it (where the
norm crosses --max-norm, not where a slow growth began); for a divergence, the backward whose update started the
growth and the update launch.

Fix: a smaller step size or learning rate, clipping, shorter horizons or windows, damping.

    from gradcheck.clip import clip_grad_norm
    total = clip_grad_norm(params, max_norm=1.0)
"""


@dataclass(frozen=True, eq=False)
class NormExplosion(Record):
    """A param's gradient norm past --max-norm, or growing with the loss update after update (``divergence``):
    the norms, the bound, the peak; ``origin`` the launch where it crosses the bound; ``iteration``/
    ``iterations``/``count``: the backwards over the bound (exec's keys until 0.1; the peak's when none was)."""

    max_norm: float
    max_norm_given: bool
    peak: float | None
    tracks_loss: bool
    iteration: int | None
    site: str | None
    iterations: tuple[int, ...]
    count: int
    norms: tuple[float, ...] | None = None
    peak_at: int | None = None
    loss_at_peak: float | None = None
    ascent: bool | None = None
    divergence: dict | None = None
    origin: dict | None = None
    OPTIONAL = frozenset({"norms", "peak_at", "loss_at_peak", "ascent", "divergence", "origin"})

    @property
    def rank(self) -> Measure | None:
        return Measure.of(self.peak, "norm {:.3g}")

    @property
    def marks(self) -> tuple[Mark, ...]:
        return (origin_mark(self.origin, "the explosion"),) if self.origin else ()


@dataclass(frozen=True, eq=False)
class GrowthExplosion(Record):
    """Last-pass norms along an indexed family (``family``): large at one end (``largest``), tiny at the other."""

    family: str
    norms: tuple[float, ...]
    ratio: float
    largest: str
    smallest: str
    growth_threshold: float

    @property
    def rank(self) -> Measure | None:
        return Measure.of(self.ratio, "×{:.3g}")


def _over(trace: Trace, p: ParamTrace, peak: NormSample | None, options: CheckOptions) -> dict:
    """The backwards whose norm was over --max-norm (or the peak's), and the site of the first."""
    samples = (
        [(q.index, q.norm) for q in p.passes if q.has_grad]
        if trace.fixed_params
        else [(h.backward, h.norm) for h in p.history]
    )
    over = [i for i, norm in samples if math.isfinite(norm) and norm > options.max_norm]
    first = over[0] if over else (peak.backward if peak is not None else None)
    record = trace.record(first) if first is not None else None
    return {"iteration": first, "site": record.site if record is not None else None, "iterations": over[:50],
            "count": len(over)}  # fmt: skip


TRACKS = 10.0  # the relative gradient |g| / |loss| at the peak, at most this times its earlier median: a steep loss
STEPS = 4  # growing steps between consecutive backwards that make a divergence: five iterations, as the smallest
# run a user reads as one (the loss 5e8 → 4e29 in five iterations of a step past 2/L); the updates between are measured
LOSS_GROWTH = 10.0  # over the run the loss grew at least this many times ...
NORM_GROWTH = 3.0  # ... and the gradient norm this many times: growth, not noise on a plateau


def check(trace: Trace, options: CheckOptions = DEFAULT_CHECKS) -> tuple[Finding, ...]:
    findings = []
    params = [p for p in trace.params if p.is_param]
    for p in params:
        found = _judged(trace, p, options)
        if found is not None:
            findings.append(found)
    for p in trace.params:
        # a leaf the program was seen stepping against its gradient (updated on the host, no update launch): its
        # divergence is the program's training diverging, whatever else it is
        if not p.is_param and p.growth is not None and _grew(p.growth) and _descends(p.growth):
            findings.append(_divergence(trace, p, p.growth, options))
    for fam, members in group_by_family(params, key=lambda p: p.name).items():
        if len(members) >= 3:
            found = _growth(fam, members, options)
            if found is not None:
                findings.append(found)
    return tuple(findings)


def _judged(trace: Trace, p: ParamTrace, options: CheckOptions) -> Finding | None:
    run = p.growth if p.growth is not None and _grew(p.growth) else None
    if run is not None and _descends(run):
        return _divergence(trace, p, run, options)
    peak = _peak(p)
    if peak is not None and peak.norm > options.max_norm:
        ascent = run is not None and run.ascent > 0 and run.descent == 0  # every measured update along +g
        return _over_max_norm(trace, p, peak, options, ascent)
    if run is not None and not run.measured:
        return _unmeasured(trace, p, run, peak, options)  # grew as a divergence does, its updates unseen: no verdict
    return None


def _grew(run: GrowthRun) -> bool:
    """Enough consecutive growth, by enough, to be more than noise: the loss and the gradient at least."""
    return (
        run.steps >= STEPS
        and run.losses[1] >= LOSS_GROWTH * abs(run.losses[0])
        and run.norms[1] >= NORM_GROWTH * run.norms[0]
    )


def _descends(run: GrowthRun) -> bool:
    """Every measured update (two at least) stepped against the gradient, larger than the last, and past the minimum
    along it (the next gradient pointed back: an overshoot). A correct program whose loss grows while it descends
    (a target moving away, a penalty stiffened each step, a temperature lowered) keeps its gradient's direction."""
    return run.measured >= 2 and run.descent == run.measured == run.overshoots and run.sizes_grew


def _evidence(trace: Trace, p: ParamTrace, peak: NormSample | None, options: CheckOptions, **more) -> NormExplosion:
    return NormExplosion(
        norms=list(p.norms) if trace.fixed_params else [s.norm for s in p.history],
        max_norm=options.max_norm,
        max_norm_given=options.max_norm_given,
        peak=peak.norm if peak is not None else None,
        peak_at=peak.backward if peak is not None else None,
        loss_at_peak=peak.loss if peak is not None else None,
        **_over(trace, p, peak, options),
        **more,
    )


def _run_evidence(run: GrowthRun) -> dict:
    first, last = run.first_update, run.last_update
    return {
        "start": run.start,
        "end": run.end,
        "steps": run.steps,
        "losses": list(run.losses),
        "norms": list(run.norms),
        "updates_measured": run.measured,
        "descent": run.descent,
        "ascent": run.ascent,
        "update_sizes": [first.size, last.size] if first is not None and last is not None else [],
        "nonfinite_at": run.nonfinite_at,
        "update_site": run.update_site,
    }


def _divergence(trace: Trace, p: ParamTrace, run: GrowthRun, options: CheckOptions) -> Finding:
    first, last = run.first_update, run.last_update
    launch = f" (the update at {short_site(run.update_site)})" if run.update_site else ""
    ending = (
        f"and at backward {run.nonfinite_at} it went NaN/Inf"
        if run.nonfinite_at is not None
        else f"and it was still growing at the program's last audited backward ({run.end})"
    )
    message = (
        f"the training diverges: from the update after backward {run.start}{launch} on, each of {run.steps} "
        f"consecutive updates made the loss ({run.losses[0]:.3g} → {run.losses[1]:.3g}), this gradient's norm "
        f"({run.norms[0]:.3g} → {run.norms[1]:.3g}) and the next update ({first.size:.3g} → {last.size:.3g}, "
        f"every one against the gradient and past the minimum: the next gradient pointed back) grow, {ending}: the "
        "step overshoots the minimum by more each time, "
        "a step size past the stable range (gradient descent needs a step below 2/L, L the loss's curvature)"
    )
    return Finding(
        check=NAME,
        severity=Severity.ERROR,
        subject=p.subject,
        message=message,
        hint="lower the learning rate / step size until the loss falls, or clip the gradient "
        "(gradcheck.clip.clip_grad_norm)",
        evidence=_evidence(trace, p, _peak(p), options, tracks_loss=False, divergence=_run_evidence(run)),
    )


def _unmeasured(
    trace: Trace, p: ParamTrace, run: GrowthRun, peak: NormSample | None, options: CheckOptions
) -> Finding | None:
    """A run that grew like a divergence whose updates gradcheck did not measure (a param too large to copy, one
    it could not read): no verdict, an info, so the user knows what to look at."""
    return Finding(
        check=NAME,
        severity=Severity.INFO,
        subject=p.subject,
        message=(
            f"the loss ({run.losses[0]:.3g} → {run.losses[1]:.3g}) and this gradient's norm ({run.norms[0]:.3g} → "
            f"{run.norms[1]:.3g}) grew on each of {run.steps} consecutive backwards from backward {run.start}, but "
            "gradcheck could not measure the updates between them (whether they step against the gradient, and "
            "grow): a diverging optimizer cannot be told from an objective meant to grow"
        ),
        hint="if the program minimises this loss, lower the step size or clip; nothing to fix if it is meant to grow",
        evidence=NormExplosion(
            max_norm=options.max_norm,
            max_norm_given=options.max_norm_given,
            tracks_loss=False,
            peak=peak.norm if peak is not None else None,
            divergence=_run_evidence(run),
            **_over(trace, p, peak, options),
        ),
    )


def _over_max_norm(trace: Trace, p: ParamTrace, peak: NormSample, options: CheckOptions, ascent: bool) -> Finding:
    tracked = None if options.max_norm_given or ascent else _tracks_loss(p, peak)
    where = f" on {trace.unit} {peak.backward}" if not trace.fixed_params else ""
    message = f"gradient norm {peak.norm:.4g}{where} exceeds --max-norm {options.max_norm:.3g}"
    excused = tracked is not None or (ascent and not options.max_norm_given)
    if options.max_norm_given:
        message += " (the bound you gave: it holds whatever the loss did)"
    elif ascent:
        message += (
            ", reached by gradient ascent: the program's updates step along the gradient, so it maximises this "
            "objective and its growth is meant"
        )
    elif tracked is not None:
        before, now = tracked
        message += (
            f", but only as the loss grew: |g|/|loss| was {before:.3g} (median before) and is {now:.3g} now, "
            "so the objective got steep (a penalty switching on), not the backward"
        )
    origin = first_origin(trace, "growth")
    if origin is not None and not excused:
        message += f"; {origin_text(origin, f'exceed {options.max_norm:.3g}', 'it crosses --max-norm')}"
    return Finding(
        check=NAME,
        severity=Severity.INFO if excused else Severity.ERROR,
        subject=p.subject,
        message=message,
        hint="nothing to fix if the objective is meant to be steep (or to grow); else rescale it"
        if excused
        else "shorten the horizon, add damping, or clip (gradcheck.clip.clip_grad_norm / --clip-norm)",
        evidence=_evidence(
            trace,
            p,
            peak,
            options,
            tracks_loss=tracked is not None,
            ascent=ascent,
            origin=origin_evidence(origin) if origin is not None else None,
        ),
    )


def _peak(p: ParamTrace) -> NormSample | None:
    if p.peak is not None:
        return p.peak
    finite = [q for q in p.passes if q.has_grad and math.isfinite(q.norm)]
    best = max(finite, key=lambda q: q.norm, default=None)
    return NormSample(best.index, best.norm, None) if best is not None else None


def _tracks_loss(p: ParamTrace, peak: NormSample) -> tuple[float, float] | None:
    """(median |g|/|loss| before the peak, |g|/|loss| at it) when the gradient grew no faster than the loss."""
    if not peak.loss or not math.isfinite(peak.loss):
        return None
    earlier = sorted(
        s.norm / abs(s.loss)
        for s in p.history
        if s.backward < peak.backward and s.loss and math.isfinite(s.loss) and math.isfinite(s.norm)
    )
    if len(earlier) < 3:
        return None  # nothing to compare with: a first gradient above --max-norm is not explained by anything
    median, now = earlier[len(earlier) // 2], peak.norm / abs(peak.loss)
    return (median, now) if now <= TRACKS * median else None


def _growth(fam: str, members: list[ParamTrace], options: CheckOptions) -> Finding | None:
    """Last-pass norms along the family: large at one end, tiny at the other."""
    norms = [m.passes[-1].norm if m.passes and m.passes[-1].has_grad else math.nan for m in members]
    finite = [(i, n) for i, n in enumerate(norms) if math.isfinite(n) and n > 0]
    if len(finite) < 3:
        return None
    (lo_i, lo), (hi_i, hi) = min(finite, key=lambda t: t[1]), max(finite, key=lambda t: t[1])
    if hi / lo < options.growth:
        return None
    direction = "toward the start" if hi_i < lo_i else "toward the end"
    return Finding(
        check=NAME,
        severity=Severity.WARNING,
        subject=members[hi_i].subject,
        message=(
            f"gradient norm grows ×{hi / lo:.3g} across {fam} ({members[lo_i].subject}: {lo:.3g}, "
            f"{members[hi_i].subject}: {hi:.3g}), {direction} of the sequence: backpropagation through the horizon "
            "amplifies it"
        ),
        hint="shorten the horizon or optimise over windows, add damping, or clip per step (gradcheck.clip)",
        evidence=GrowthExplosion(
            family=fam,
            norms=norms,
            ratio=hi / lo,
            largest=members[hi_i].subject,
            smallest=members[lo_i].subject,
            growth_threshold=options.growth,
        ),
    )
