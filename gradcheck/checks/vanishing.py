"""vanishing: a gradient that is not zero but too small to matter.

Relative sensitivity |g| * max(|x|, 1) / |loss|: how much the loss would change, relative to
itself, for a step the size of the param along the gradient. Below float32's resolution
(~1e-7) an optimiser cannot see the param at all. Exactly zero is missing-gradient's business.
"""

from __future__ import annotations

import math

from gradcheck.model.findings import Finding, Severity
from gradcheck.model.options import DEFAULT_CHECKS, CheckOptions
from gradcheck.model.paths import family_prefix, family_sizes, group_by_family
from gradcheck.model.trace import ParamTrace, Trace

NAME = "vanishing"
SUMMARY = "nonzero gradients must be large enough, relative to the loss, to be resolved in float32"

EXPLAIN = """
What it means: a gradient is nonzero but, relative to the loss, below what float32 resolves: an optimiser cannot
move this param.

Common causes: a coefficient in the wrong units (1e-12 instead of 1e-3), a loss dominated by other terms, a
param that only matters through a saturated function.

Fix: rescale the loss or the parametrisation so every param's influence is within a few orders of magnitude.
"""


def check(trace: Trace, options: CheckOptions = DEFAULT_CHECKS) -> tuple[Finding, ...]:
    losses = [abs(r.loss) for r in trace.passes if r.loss is not None and math.isfinite(r.loss)]
    if not losses or max(losses) == 0:
        return ()
    loss = max(losses)
    params = [p for p in trace.params if p.is_param]
    tiny = [(p, s) for p in params if (s := _sensitivity(p, loss)) is not None and s < options.vanishing]
    sizes = family_sizes(p.name for p in params)
    findings = []
    for fam, members in group_by_family(tiny, key=lambda t: t[0].name).items():
        param, sens = min(members, key=lambda t: t[1])
        who = family_prefix(len(members), sizes[fam], fam, shown="smallest")
        findings.append(
            Finding(
                check=NAME,
                severity=Severity.WARNING,
                subject=param.subject,
                message=(
                    f"{who}gradient norm {param.passes[-1].norm:.3g} against loss {loss:.3g}: relative sensitivity "
                    f"{sens:.2g}, below float32 resolution ({options.vanishing:.1g})"
                ),
                hint="rescale the loss or the parametrisation, or check that the loss depends on this param as intended",
                evidence={
                    "sensitivity": sens,
                    "norm": param.passes[-1].norm,
                    "value_norm": param.value_norm,
                    "loss": loss,
                    "threshold": options.vanishing,
                    "affected": [p.subject for p, _ in members],
                },
            )
        )
    return tuple(findings)


def _sensitivity(param: ParamTrace, loss: float) -> float | None:
    last = param.passes[-1] if param.passes else None
    if last is None or not last.has_grad or last.norm == 0 or not math.isfinite(last.norm):
        return None
    scale = param.value_norm if math.isfinite(param.value_norm) and param.value_norm > 1 else 1.0
    return last.norm * scale / loss
