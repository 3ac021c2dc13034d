"""mutated-gradient: the gradient the user's loop reads is not the one backward produced.

The runner takes a bit-exact checksum of every param's gradient right after backward and again
after ``after_backward()`` (what the loop does before reading gradients, e.g. an optimizer step).
They differ when something wrote into the gradient buffers in between: an optimizer that reuses
gradient memory for its own state (as AdamWScheduleFree does in PyTorch), in-place scaling, or a
zero step placed too early. The norms the user then logs look wrong (the seed: 700 vs < 5).
"""

from __future__ import annotations

from gradcheck.model.findings import Finding, Severity
from gradcheck.model.paths import family_prefix, family_sizes, group_by_family
from gradcheck.model.trace import Trace

NAME = "mutated-gradient"
SUMMARY = "gradients must not change between backward and the point where the loop reads them"

EXPLAIN = """
What it means: the gradient your loop reads after after_backward() is not the one backward produced.

Common causes: an optimizer that keeps its state in the gradient memory or scales gradients in place
(AdamWScheduleFree does this in PyTorch), a zero step or clip placed before the readout.

Fix: read or copy gradients right after backward, before the optimizer step.

    tape.backward(loss)
    logged = [p.grad.numpy().copy() for p in params]
    optimizer.step()
"""


def check(trace: Trace, options=None) -> tuple[Finding, ...]:
    affected = [p for p in trace.params if any(q.mutated for q in p.passes)]
    sizes = family_sizes(p.name for p in trace.params)
    findings = []
    for fam, members in group_by_family(affected, key=lambda p: p.name).items():
        worst = max(members, key=lambda p: max(abs((q.readout_norm or 0) - q.norm) for q in p.passes))
        first = next(i for i, q in enumerate(worst.passes) if q.mutated)
        q = worst.passes[first]
        who = family_prefix(len(members), sizes[fam], fam)
        findings.append(
            Finding(
                check=NAME,
                severity=Severity.ERROR,
                subject=worst.subject,
                message=(
                    f"{who}backward produced norm {q.norm:.4g}, but after after_backward() the buffer holds norm "
                    f"{q.readout_norm:.4g} (pass {first + 1}): something wrote into the gradient before it was read"
                ),
                hint="read or copy gradients before the optimizer step, or give the optimizer its own state buffers",
                evidence={
                    "first_pass": first + 1,
                    "backward_norms": [p.norm for p in worst.passes],
                    "readout_norms": [p.readout_norm for p in worst.passes],
                    "affected": [m.subject for m in members],
                },
            )
        )
    return tuple(findings)
