"""explosion: a gradient norm above ``--max-norm``, or one that grows by orders of magnitude
along an indexed family (``controls[0..T]``): backpropagation through a long horizon amplifying
the gradient step after step (chaotic dynamics, stiff contacts), not a planted bug.
"""

from __future__ import annotations

import math

from gradcheck.model.findings import Finding, Severity
from gradcheck.model.options import DEFAULT_CHECKS, CheckOptions
from gradcheck.model.paths import group_by_family
from gradcheck.model.trace import ParamTrace, Trace

NAME = "explosion"
SUMMARY = "gradient norms must stay below --max-norm and not grow by orders of magnitude along the horizon"

EXPLAIN = """
What it means: a gradient norm exceeds --max-norm, or grows by orders of magnitude along the horizon
(controls[0] >> controls[T]).

Common causes: chaotic dynamics (double pendulum), stiff contacts, long horizons, a bug that multiplies the
adjoint every step.

Fix: shorter horizons or windows, damping, or clipping.

    from gradcheck.clip import clip_grad_norm
    total = clip_grad_norm(params, max_norm=1.0)
"""


def check(trace: Trace, options: CheckOptions = DEFAULT_CHECKS) -> tuple[Finding, ...]:
    findings = []
    for p in trace.params:
        peak = max((q.norm for q in p.passes if q.has_grad and math.isfinite(q.norm)), default=0.0)
        if peak > options.max_norm:
            findings.append(
                Finding(
                    check=NAME,
                    severity=Severity.ERROR,
                    subject=p.subject,
                    message=f"gradient norm {peak:.4g} exceeds --max-norm {options.max_norm:.3g}",
                    hint="shorten the horizon, add damping, or clip (gradcheck.clip.clip_grad_norm / --clip-norm)",
                    evidence={"norms": list(p.norms), "max_norm": options.max_norm},
                )
            )
    for fam, members in group_by_family(trace.params, key=lambda p: p.name).items():
        if len(members) >= 3:
            found = _growth(fam, members, options)
            if found is not None:
                findings.append(found)
    return tuple(findings)


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
