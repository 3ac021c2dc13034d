"""explosion: a gradient norm above ``--max-norm``, or one that grows by orders of magnitude
along an indexed family (``controls[0..T]``): backpropagation through a long horizon amplifying
the gradient step after step (chaotic dynamics, stiff contacts), not a planted bug.

A param's norm above ``--max-norm`` is an error, with one exception read off the program's own history: when
the gradient grew only as much as the loss did (its norm relative to the loss stayed within ``TRACKS`` of what it
was on the earlier backwards), the objective got steep, not the backward: a penalty switching on (Newton's drone
MPC jumps from 15 to 3.6e6 when a sampled trajectory meets its 1e4 collision penalty, and so does its loss).
That is an info.
"""

from __future__ import annotations

import math

from gradcheck.model.findings import Finding, Severity
from gradcheck.model.options import DEFAULT_CHECKS, CheckOptions
from gradcheck.model.origins import first_origin, origin_evidence, origin_text
from gradcheck.model.paths import group_by_family
from gradcheck.model.trace import NormSample, ParamTrace, Trace

NAME = "explosion"
SUMMARY = "gradient norms must stay below --max-norm and not grow by orders of magnitude along the horizon"

EXPLAIN = """
What it means: a gradient norm exceeds --max-norm, or grows by orders of magnitude along the horizon
(controls[0] >> controls[T]).

Evidence and severity: a param's norm above --max-norm (default 1e6, the same option for run, exec and blame) is
an error, unless the gradient only grew as the loss did: if |g| / |loss| at the peak is within 10x of its median
over the earlier backwards, the objective got steep (a penalty switching on, as in Newton's drone MPC), not the
backward: an info. A first gradient already above --max-norm has nothing to be compared with: an error. Growth
by --growth (1e4) across an indexed family is a warning.

Common causes: chaotic dynamics (double pendulum), stiff contacts, long horizons, a bug that multiplies the
adjoint every step.

Where it crosses the line: the first launch of backward (kernel, line, step of a rollout) whose adjoint output
exceeds --max-norm, found by bisection over the recorded launches at the first backward that shows it (where the
norm crosses --max-norm, not where a slow growth began).

Fix: shorter horizons or windows, damping, or clipping.

    from gradcheck.clip import clip_grad_norm
    total = clip_grad_norm(params, max_norm=1.0)
"""


TRACKS = 10.0  # the relative gradient |g| / |loss| at the peak, at most this times its earlier median: a steep loss


def check(trace: Trace, options: CheckOptions = DEFAULT_CHECKS) -> tuple[Finding, ...]:
    findings = []
    params = [p for p in trace.params if p.is_param]
    for p in params:
        peak = _peak(p)
        if peak is None or peak.norm <= options.max_norm:
            continue
        tracked = _tracks_loss(p, peak)
        where = f" on {trace.unit} {peak.backward}" if not trace.fixed_params else ""
        message = f"gradient norm {peak.norm:.4g}{where} exceeds --max-norm {options.max_norm:.3g}"
        if tracked is not None:
            before, now = tracked
            message += (
                f", but only as the loss grew: |g|/|loss| was {before:.3g} (median before) and is {now:.3g} now, "
                "so the objective got steep (a penalty switching on), not the backward"
            )
        origin = first_origin(trace, "growth")
        if origin is not None and tracked is None:
            message += f"; {origin_text(origin, f'exceed {options.max_norm:.3g}', 'it crosses --max-norm')}"
        findings.append(
            Finding(
                check=NAME,
                severity=Severity.INFO if tracked is not None else Severity.ERROR,
                subject=p.subject,
                message=message,
                hint="shorten the horizon, add damping, or clip (gradcheck.clip.clip_grad_norm / --clip-norm)"
                if tracked is None
                else "nothing to fix if the penalty is meant to be steep; else rescale it",
                evidence={
                    "norms": list(p.norms) if trace.fixed_params else [s.norm for s in p.history],
                    "max_norm": options.max_norm,
                    "peak": peak.norm,
                    "peak_at": peak.backward,
                    "loss_at_peak": peak.loss,
                    "tracks_loss": tracked is not None,
                }
                | ({"origin": origin_evidence(origin)} if origin is not None else {}),
            )
        )
    for fam, members in group_by_family(params, key=lambda p: p.name).items():
        if len(members) >= 3:
            found = _growth(fam, members, options)
            if found is not None:
                findings.append(found)
    return tuple(findings)


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
        evidence={
            "family": fam,
            "norms": norms,
            "ratio": hi / lo,
            "largest": members[hi_i].subject,
            "smallest": members[lo_i].subject,
            "growth_threshold": options.growth,
        },
    )
