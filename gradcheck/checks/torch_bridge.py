"""torch-bridge: what goes wrong where a PyTorch program hands tensors to Warp and gradients back.

The evidence (gradcheck.pytorch.bridge) is read on audited torch backwards and ``torch.autograd.grad`` calls
(gradcheck.pytorch.grad_calls), each kind from what torch and
Warp did with memory, never from a guess: a returned gradient that *is* the ``.grad`` it will be added into; a
gradient Warp wrote into a buffer torch no longer holds as the tensor's ``.grad``; a ``grad_output`` changed in
place by a custom Function's backward. A tensor handed to Warp without a gradient is the cause missing-gradient
names (it is where the chain breaks), not a finding of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from gradcheck.model.evidence import Record
from gradcheck.model.findings import Finding, Severity
from gradcheck.model.trace import Trace

NAME = "torch-bridge"
SUMMARY = "gradients crossing the torch<->Warp bridge must reach torch once, in the memory torch reads"

EXPLAIN = """
What it means: a torch.autograd.Function that runs Warp kernels (wp.from_torch in, wp.Tape, wp.to_torch out)
hands gradients between the two in a way that changes them. Warp arrays made with wp.from_torch share memory
with the tensor, and with its .grad when the tensor requires grad; Warp's writes there are invisible to
autograd's own in-place checks.

Evidence and severity (read on audited torch backwards):
- doubled-gradient (error): backward returned, for a leaf, a tensor whose memory already is that leaf's .grad
  (wp.to_torch(x_wp.grad) where x_wp = wp.from_torch(x) wrapped x.grad): torch adds the returned tensor into
  the same memory, so the gradient is twice what it should be (plus whatever .grad held).
- orphaned-alias (error): during backward, Warp wrote a tensor's gradient into the buffer an earlier
  wp.from_torch wrapper aliased, but that buffer is no longer the tensor's .grad (optimizer.zero_grad() with its
  default set_to_none=True replaced it): the gradient never reaches torch.
- tape-reused (error): an adjoint Warp hands to torch (wp.to_torch) in a torch backward (or autograd.grad call)
  still held what it handed in an earlier one when Warp's backward began: the tape and its arrays are made once
  and reused and nothing zeroes them (tape.zero()), so torch receives the sum of both backwards. A backward run
  twice over one graph (retain_graph; torch.autograd.gradcheck's reentrancy check) without tape.zero() first is
  the same mistake.
- grad-output-written: backward changed its grad_output in place (y.grad = wp.from_torch(grad_output): Warp's
  backward zeroes an output's adjoint after reading it). Error when torch handed the same tensor to another node
  that read it after the write (the skip path of a residual block gets zeros), or when it is the grad_outputs a
  program passed to torch.autograd.grad (its own tensor: torch.autograd.gradcheck seeds each Jacobian row with
  one, warp#1732); a warning when no other node read it afterwards in this backward (correct today, wrong as
  soon as the graph around it changes).
- saved-overwritten (error): a custom Function gave torch a tensor that is Warp memory (wp.to_torch(out) of an
  output array it allocates once, returned or saved without a copy), a later write (its next call) changed that
  memory before backward ran, and a node of this backward had saved it (h1 * w1 saves h1): torch's version
  counter cannot see Warp's writes, so that gradient is computed from other values. Silent when the bytes are the
  same, and for a Function that recomputes a buffer it saved itself in its own backward. The same error for a
  Function that writes its argument in place through a wp.from_torch alias after another op saved it (y = h * w,
  then Warp writes h), and for a saved tensor written between the forward and the backward through an alias torch
  does not version: p.data.clamp_() (weight clipping placed before backward), a NumPy array from .numpy(),
  p.data = ..., a Warp kernel writing wp.from_torch(p). Silent for reads, for writes that leave the values as they
  were, and for writes before the forward or after the step.
- a tensor that requires grad handed to Warp as an array without gradient (wp.from_torch(x.detach()) or
  requires_grad=False) is where a missing gradient's chain breaks: see missing-gradient.

Common causes: an output array allocated once and returned as wp.to_torch(out) by a Function called twice;
a constraint or clipping applied to the parameters between computing the loss and calling backward;
a wrapper made once outside the loop (its .grad alias goes stale at the first zero_grad());
returning wp.to_torch(x_wp.grad) for a wp.from_torch(x) that already aliases x.grad; handing grad_output itself
to Warp as the output's adjoint; a tape and arrays reused between steps without tape.zero().

Fix: wrap per call inside forward and give Warp fresh adjoints (wp.from_torch(x, requires_grad=False), then
requires_grad=True on the array), return wp.to_torch(x_wp.grad) from backward, and give Warp a copy of
grad_output (grad_output.clone()).

    @staticmethod
    def backward(ctx, grad_y):
        ctx.y.grad = wp.from_torch(grad_y.clone())
        ctx.tape.backward()
        return wp.to_torch(ctx.x.grad)
"""


@dataclass(frozen=True, eq=False)
class TorchBridgeEvidence(Record):
    """What the torch/Warp bridge did wrong (``kind``), where, on which torch backward, and whether the gradient
    output it wrote into is shared with torch."""

    kind: str
    site: str | None
    backward: int | None
    shared: bool | None


def check(trace: Trace, options=None) -> tuple[Finding, ...]:
    findings = []
    for issue in trace.bridge:
        error = issue.kind != "grad-output-written" or issue.shared
        where = f" ({issue.site})" if issue.site else ""
        # a torch.autograd.grad call before any torch backward (torch.autograd.gradcheck): its detail names the call
        when = f", backward #{issue.backward}" if issue.backward else ""
        findings.append(
            Finding(
                check=NAME,
                severity=Severity.ERROR if error else Severity.WARNING,
                subject=issue.subject,
                message=f"{issue.kind}{where}{when}: {issue.detail}",
                hint=issue.fix,
                evidence=TorchBridgeEvidence(issue.kind, issue.site, issue.backward, issue.shared),
            )
        )
    return tuple(findings)
