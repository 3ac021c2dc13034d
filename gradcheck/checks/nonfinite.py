"""nonfinite: NaN or Inf in a param's gradient.

The finding says on which pass it first appeared and whether the forward loss was finite then:
a finite loss with a NaN gradient is the classic adjoint of sqrt(0), length(0) or normalize(0)
(d|v|/dv = v/|v| is 0/0 at v = 0), a bug in backward only, invisible to anyone who looks at the
loss.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gradcheck.model.evidence import Mark, Measure, Record
from gradcheck.model.findings import Finding, Severity
from gradcheck.model.origins import first_origin, origin_evidence, origin_mark, origin_text
from gradcheck.model.paths import family_prefix, family_sizes, group_by_family
from gradcheck.model.trace import ParamTrace, PassRecord, Trace

NAME = "nonfinite"
SUMMARY = "gradients and the loss must be free of NaN and Inf"

EXPLAIN = """
What it means: a gradient holds NaN or Inf. If the forward loss was finite, backward alone produced it.

Severity: error on a param's gradient (declared, or updated from its gradient). On a leaf nothing updates: an error
when the program showed no param at all (a one-shot gradient, Jacobian row or vector-Jacobian product: the gradient
is the program's result) and the forward is known finite, so backward alone made the NaN; else an info (the NaN
flows through backward, but no update consumes it, or the forward already made it).

The forward is judged by the loss; a backward seeded with tape.backward(grads={y: seed}) has none, so it is judged
by its seed: the seeded outputs' values (read right before backward) and the seeds. All finite: backward alone made
the NaN; a seeded output not finite: the forward did; values that could not be read: no word on the forward. An
unknown loss is never taken for a non-finite one.

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
    one_shot = not any(p.is_param for p in trace.params)  # nothing updated: the gradients are the program's result
    for params in (True, False):  # a param's NaN is an error; a leaf's (nothing updates it) see _severity
        chosen = [p for p in affected if p.is_param == params]
        for fam, members in group_by_family(chosen, key=lambda p: p.name).items():
            worst = max(members, key=lambda p: max(q.nonfinite for q in p.passes))
            findings.append(_finding(trace, fam, members, sizes[fam], worst, one_shot))
    if not findings:
        findings.extend(_loss_finding(trace))
    return tuple(findings)


@dataclass(frozen=True, eq=False)
class NonfiniteGradient(Record):
    """A param family's gradient holds NaN/Inf: the worst member's counts per pass (``nan``, ``inf``), whether
    the forward was finite, the first backward launch that made it (``origin``), ``affected`` every member;
    ``iteration``/``iterations``/``count``: the passes it showed on (exec's keys until 0.1)."""

    first_pass: int
    site: str | None
    role: str | None
    nan: tuple[int, ...]
    inf: tuple[int, ...]
    loss_finite: bool
    loss: float | None
    forward_finite: bool | None
    one_shot: bool
    seeded: tuple[str, ...] | None
    affected: tuple[str, ...]
    origin: dict | None
    losses: tuple[float | None, ...]
    iteration: int
    iterations: tuple[int, ...]
    count: int
    OPTIONAL = frozenset({"seeded", "origin"})

    @property
    def subjects(self) -> tuple[str, ...]:
        return self.affected

    @property
    def rank(self) -> Measure | None:
        if not (self.nan and self.inf):
            return None
        return Measure.of(self.nan[-1] + self.inf[-1], "{} non-finite")

    @property
    def marks(self) -> tuple[Mark, ...]:
        return (origin_mark(self.origin, "NaN/Inf"),) if self.origin else ()


@dataclass(frozen=True, eq=False)
class NonfiniteLoss(Record):
    """The loss is not finite while every gradient is: the first pass it showed on and every pass's loss."""

    first_pass: int
    losses: tuple[float | None, ...]
    iteration: int
    iterations: tuple[int, ...]
    count: int


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
            evidence=NonfiniteLoss(
                first_pass=trace.passes[first].index,
                losses=[r.loss for r in trace.passes],
                iteration=trace.passes[first].index,
                iterations=[trace.passes[i].index for i in bad][:50],
                count=len(bad),
            ),
        )
    ]


@dataclass(frozen=True)
class _Forward:
    """What the evidence says about the forward of the backward that first showed the NaN."""

    finite: bool | None  # True: backward alone made it; False: the forward (or the seed) did; None: unknown
    words: str  # how the finding says it
    loss: float | None  # the loss, when there is one and it is finite


def _forward(at: PassRecord | None) -> _Forward:
    """The loss tells, when there is one; a backward seeded with grads= is judged on its seed (outputs and seeds)."""
    loss = at.loss if at is not None else None
    if loss is not None:
        if math.isfinite(loss):
            return _Forward(
                True,
                f"the forward loss was finite ({loss:.6g}), so the NaN/Inf comes from backward alone: "
                "the classic adjoint of sqrt(0), length(0) or normalize(0)",
                loss,
            )
        return _Forward(False, "the forward loss was not finite either: the forward pass already produced it", None)
    seeded = at.seeded if at is not None else None
    if seeded is None:
        return _Forward(None, "the loss is unknown, so whether the forward produced it is not known", None)
    outputs = ", ".join(seeded.outputs[:3]) + (" …" if len(seeded.outputs) > 3 else "")
    if seeded.values_finite is False:
        return _Forward(
            False, f"the seeded output ({outputs}) was not finite either: the forward pass already produced it", None
        )
    if seeded.seeds_finite is False:
        return _Forward(False, f"the seed given to tape.backward(grads=...) for {outputs} is not finite itself", None)
    if seeded.finite:
        return _Forward(
            True,
            f"backward was seeded with grads= on {outputs}, whose values and seed were finite, so "
            "the NaN/Inf comes from backward alone: the classic adjoint of sqrt(0), length(0) or "
            "normalize(0)",
            None,
        )
    return _Forward(
        None,
        f"backward was seeded with grads= on {outputs}, whose values could not be read, so whether "
        "the forward produced it is not known",
        None,
    )


def _severity(worst: ParamTrace, forward: _Forward, one_shot: bool) -> Severity:
    """A param's NaN is an error. A leaf's is an error only in a program that updated nothing (the gradient is its
    result) and when backward alone made it; else nothing consumes it, or the forward is where to look: an info."""
    if worst.is_param or (one_shot and forward.finite is True):
        return Severity.ERROR
    return Severity.INFO


def _finding(
    trace: Trace, fam: str, members: list[ParamTrace], family_size: int, worst: ParamTrace, one_shot: bool
) -> Finding:
    bad = [q.index for q in worst.passes if q.has_grad and q.nonfinite]
    record = next(q for q in worst.passes if q.has_grad and q.nonfinite)
    first = record.index
    at = trace.record(first)
    forward = _forward(at)
    severity = _severity(worst, forward, one_shot)
    who = family_prefix(len(members), family_size, fam)
    leaf = ""
    if not worst.is_param:
        leaf = (
            "; the program updates nothing from its gradients, so this gradient is its result"
            if one_shot
            else "; no launch was seen updating it from its gradient, so training is unharmed"
        )
    where_in = f" ({at.site})" if at is not None and at.site and not trace.fixed_params else ""
    origin = first_origin(trace, "nonfinite")
    started = f"; {origin_text(origin, 'non-finite')}" if origin is not None else ""
    return Finding(
        check=NAME,
        severity=severity,
        subject=worst.subject,
        message=f"{who}{record.nan} NaN and {record.inf} Inf of {record.nonzero} nonzero values from {trace.unit} "
        f"{first}{where_in} on; {forward.words}{started}{leaf}",
        hint=(
            "guard the operation whose derivative is singular at 0 (wp.length(d) handles d = 0; wp.sqrt(wp.dot(d, d)) "
            "does not, nor does torch.sqrt(x) or a norm at 0: add an eps or branch); --trace-nonfinite names the "
            "first Warp operation that produced it, torch.autograd.detect_anomaly() the first torch one"
        )
        if forward.finite is not False
        else "find where the forward first makes a NaN/Inf (the inputs, a division by zero, log or sqrt of a "
        "non-positive value, an overflow); --trace-nonfinite names the first Warp operation that produced it, "
        "torch.autograd.detect_anomaly(check_nan=True) the first torch one",
        evidence=NonfiniteGradient(
            first_pass=first,
            site=at.site if at is not None else None,
            role=worst.role,
            nan=[q.nan for q in worst.passes],
            inf=[q.inf for q in worst.passes],
            loss_finite=forward.loss is not None,
            loss=forward.loss,
            forward_finite=forward.finite,
            one_shot=one_shot,
            seeded=list(at.seeded.outputs) if at is not None and at.seeded is not None else None,
            affected=[m.subject for m in members],
            origin=origin_evidence(origin) if origin is not None else None,
            losses=[r.loss for r in trace.passes],
            iteration=first,
            iterations=bad[:50],
            count=len(bad),
        ),
    )
