"""mutated-gradient: a gradient read after the update that consumed it rewrote it in place.

The update step of a training loop consumes the gradient. An optimizer that also keeps its own state in the
gradient buffer (AdamW ScheduleFree in PyTorch does), or scales it in place as part of the step, leaves a buffer
that whatever reads it next (a logged norm, a clip, a second optimizer) takes for the gradient: a logged norm of
~700 where the truth is below 5. The evidence (gradcheck.observe.gradient_use) is one launch that changed both a
param and its gradient, then a read of that gradient: a host read (``x.grad.numpy()``), a launch whose code loads
it, or, under ``gradcheck run``, the readout after ``after_backward()``, which is where a scenario's loop reads.

Rewriting the gradient *before* the update (projecting it onto constraints, clipping it in place: what Warp's FEM
shape optimisation does before Adam) is the program preparing what its update consumes: not a finding.
"""

from __future__ import annotations

from gradcheck.model.findings import Finding, Severity
from gradcheck.model.paths import group_by_family
from gradcheck.model.trace import Trace

NAME = "mutated-gradient"
SUMMARY = "a gradient must not be read after the update that consumed it rewrote it in place"

EXPLAIN = """
What it means: the launch that updated a param from its gradient also rewrote the gradient in place, and
something read the gradient afterwards (a logged norm, a clip, a readout). What it read is not the gradient
backward produced: the finding gives both norms, the launch that rewrote it and the read, with their lines.

Common causes: an optimizer that keeps its state (momentum, a step) in the gradient buffer, or scales the
gradient in place as part of the step (AdamWScheduleFree does this in PyTorch); a norm logged after the step.
Not a finding: rewriting the gradient before the update consumes it (projection onto constraints, in-place
clipping), which is how a program prepares its update.

In a PyTorch program (gradcheck exec) the evidence is an optimizer step that changed a .grad (bit-exact
fingerprints before and after it), then a torch operation reading that tensor before the next zero_grad(),
backward or step; the program's own in-place writes to it (p.grad.zero_()) are not reads.

Fix: read or copy gradients before the step, or give the optimizer its own state buffers.

    tape.backward(loss)
    logged = [np.linalg.norm(p.grad.numpy()) for p in params]   # read first
    optimizer.step()                                            # then let the update consume them
"""


def check(trace: Trace, options=None) -> tuple[Finding, ...]:
    hits = [(record, rewrite) for record in trace.passes for rewrite in record.rewrites]
    findings = []
    for _fam, members in group_by_family(hits, key=lambda h: h[1].subject).items():
        record, first = members[0]
        subjects = list(dict.fromkeys(r.subject for _rec, r in members))
        others = f" (and {len(subjects) - 1} more of the family)" if len(subjects) > 1 else ""
        findings.append(
            Finding(
                check=NAME,
                severity=Severity.ERROR,
                subject=first.subject,
                message=(
                    f"{first.subject}{others}: backward #{record.index} produced norm {first.produced_norm:.4g}, then "
                    f"{first.writer} updated the param and rewrote its gradient in place, and {first.reader} read "
                    f"norm {first.read_norm:.4g}: whatever reads it sees another gradient "
                    f"({len(members)} of {trace.iterations or len(trace.passes)} {trace.units})"
                ),
                hint="read or copy gradients before the optimizer step (torch's foreach SGD with momentum, and "
                "optimizers such as ScheduleFree, rewrite .grad in place), or give the optimizer its own state buffers",
                evidence={
                    "first_pass": record.index,
                    "writer": first.writer,
                    "reader": first.reader,
                    "produced_norm": first.produced_norm,
                    "read_norm": first.read_norm,
                    "iterations": [rec.index for rec, _r in members][:50],
                    "affected": subjects,
                },
            )
        )
    return tuple(findings)
