"""nonfinite: NaN or Inf in a param's gradient.

The finding says on which pass it first appeared and whether the forward loss was finite then:
a finite loss with a NaN gradient is the classic adjoint of sqrt(0), length(0) or normalize(0)
(d|v|/dv = v/|v| is 0/0 at v = 0), a bug in backward only, invisible to anyone who looks at the
loss.
"""

from __future__ import annotations

import math

from gradcheck.model.findings import Finding, Severity
from gradcheck.model.origins import first_origin, origin_evidence, origin_text
from gradcheck.model.paths import family_prefix, family_sizes, group_by_family
from gradcheck.model.trace import ParamTrace, Trace

NAME = "nonfinite"
SUMMARY = "gradients and the loss must be free of NaN and Inf"

EXPLAIN = """
What it means: a gradient holds NaN or Inf. If the forward loss was finite, backward alone produced it.

Severity: error on a param's gradient (declared, or updated from its gradient); info on a leaf nothing updates
(the NaN flows through backward, but no update consumes it).

Common causes: the adjoint of sqrt(0), length(0) or normalize(0) (d|v|/dv = v/|v| is 0/0 at v = 0); log of 0;
division by a value that reaches 0; an exploding rollout.

A NaN or Inf loss with finite gradients is reported too (subject "loss"): the bad term is one no param reaches (a
constant, an uninitialised or stale buffer added to the loss), and whatever optimises or compares that loss is
broken even though every gradient looks healthy.

Where it starts: the first launch of backward (kernel, line, step of a rollout) whose adjoint output becomes
non-finite, found by bisection over the recorded launches (a few partial backwards on the tape, the program's
gradients restored), at the first backward that shows it.

Fix: guard the singular point; --trace-nonfinite names the first operation that produced the NaN.

    d = x[k + 1] - x[k]
    stretch = wp.sqrt(wp.dot(d, d) + 1e-12) - rest   # or wp.length(d), which handles d = 0
"""


def check(trace: Trace, options=None) -> tuple[Finding, ...]:
    affected = [p for p in trace.params if any(q.has_grad and q.nonfinite for q in p.passes)]
    sizes = family_sizes(p.name for p in trace.params)
    findings = []
    for params in (True, False):  # a param's NaN is an error; a leaf's (nothing updates it) an info
        chosen = [p for p in affected if p.is_param == params]
        for fam, members in group_by_family(chosen, key=lambda p: p.name).items():
            worst = max(members, key=lambda p: max(q.nonfinite for q in p.passes))
            findings.append(_finding(trace, fam, members, sizes[fam], worst))
    if not findings:
        findings.extend(_loss_finding(trace))
    return tuple(findings)


def _loss_finding(trace: Trace) -> list[Finding]:
    """Finite gradients of a loss that is not finite."""
    bad = [i for i, r in enumerate(trace.passes) if r.loss is not None and not math.isfinite(r.loss)]
    if not bad:
        return []
    first = bad[0]
    unit = trace.unit
    return [
        Finding(
            check=NAME,
            severity=Severity.ERROR,
            subject="loss",
            message=f"the loss is {trace.passes[first].loss} on {len(bad)} of {len(trace.passes)} {trace.units} (from "
            f"{unit} {trace.passes[first].index}) while every gradient is finite: the bad term is one no param reaches",
            hint="look for a term of the loss that does not depend on the params: a NaN constant, an uninitialised "
            "or stale buffer added to the loss; --trace-nonfinite names the first operation that produced it",
            evidence={"first_pass": trace.passes[first].index, "losses": [r.loss for r in trace.passes]},
        )
    ]


def _finding(trace: Trace, fam: str, members: list[ParamTrace], family_size: int, worst: ParamTrace) -> Finding:
    record = next(q for q in worst.passes if q.has_grad and q.nonfinite)
    first = record.index
    at = trace.record(first)
    loss = at.loss if at is not None else None
    loss_finite = loss is not None and math.isfinite(loss)
    who = family_prefix(len(members), family_size, fam)
    where = (
        f"the forward loss was finite ({loss:.6g}), so the NaN/Inf comes from backward alone: the classic adjoint "
        "of sqrt(0), length(0) or normalize(0)"
        if loss_finite
        else "the forward loss was not finite either: the forward pass already produced it"
    )
    leaf = "" if worst.is_param else "; no launch was seen updating it from its gradient, so training is unharmed"
    where_in = f" ({at.site})" if at is not None and at.site and not trace.fixed_params else ""
    origin = first_origin(trace, "nonfinite")
    started = f"; {origin_text(origin, 'non-finite')}" if origin is not None else ""
    return Finding(
        check=NAME,
        severity=Severity.ERROR if worst.is_param else Severity.INFO,
        subject=worst.subject,
        message=f"{who}{record.nan} NaN and {record.inf} Inf of {record.nonzero} nonzero values from {trace.unit} "
        f"{first}{where_in} on; {where}{started}{leaf}",
        hint=(
            "guard the operation whose derivative is singular at 0 (wp.length(d) handles d = 0; wp.sqrt(wp.dot(d, d)) "
            "does not, nor does torch.sqrt(x) or a norm at 0: add an eps or branch); --trace-nonfinite names the "
            "first Warp operation that produced it, torch.autograd.detect_anomaly() the first torch one"
        )
        if loss_finite or loss is None
        else "find where the forward first makes a NaN/Inf (the inputs, a division by zero, log or sqrt of a "
        "non-positive value, an overflow); --trace-nonfinite names the first Warp operation that produced it, "
        "torch.autograd.detect_anomaly(check_nan=True) the first torch one",
        evidence={
            "first_pass": first,
            "site": at.site if at is not None else None,
            "role": worst.role,
            "nan": [q.nan for q in worst.passes],
            "inf": [q.inf for q in worst.passes],
            "loss_finite": loss_finite,
            "loss": loss if loss_finite else None,
            "affected": [m.subject for m in members],
        }
        | ({"origin": origin_evidence(origin)} if origin is not None else {}),
    )
