"""mutated-gradient: a gradient read after the update that consumed it rewrote it in place, or cleared before it.

The update step of a training loop consumes the gradient. An optimizer that also keeps its own state in the
gradient buffer (AdamW ScheduleFree in PyTorch does), or scales it in place as part of the step, leaves a buffer
that whatever reads it next (a logged norm, a clip, a second optimizer) takes for the gradient: a logged norm of
~700 where the truth is below 5. The evidence (gradcheck.observe.gradient_use) is one launch that changed both a
param and its gradient, then a read of that gradient: a host read (``x.grad.numpy()``), a launch whose code loads
it, or, under ``gradcheck run``, the readout after ``after_backward()``, which is where a scenario's loop reads.

Rewriting the gradient *before* the update (projecting it onto constraints, clipping it in place: what Warp's FEM
shape optimisation does before Adam) is the program preparing what its update consumes: not a finding.

The other way round, the zero step run *before* the update (Newton's drone with ``tape.zero()`` moved ahead of
``optimizer.step``) leaves the update reading zeros: the param never moves and nothing says so. The evidence is an
update launch (it takes ``x`` and ``x.grad``, reads the gradient and writes ``x``) that read all zeros where the
backward before it had left a finite, nonzero gradient. Cleared by the program's zero step (``tape.zero()``): an
error. Cleared by a write gradcheck does not see as one (``x.grad.zero_()``, ``fill_(0)``): an error only when every
update of that backward read zeros, since zeroing some params' gradients is how a program freezes them, and no
kernel of the program's own wrote it in between. A clip, a projection (even one that zeroes every value: a box's
corner) or a gradient the program wrote itself is the program's own: silent.
"""

from __future__ import annotations

from dataclasses import dataclass

from gradcheck.model.evidence import Measure, Record
from gradcheck.model.findings import Finding, Severity
from gradcheck.model.paths import group_by_family
from gradcheck.model.sites import short_site
from gradcheck.model.trace import Trace

NAME = "mutated-gradient"
SUMMARY = (
    "a gradient must not be read after the update that consumed it rewrote it in place, nor cleared before the "
    "update reads it"
)

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

A gradient cleared before its update: the update launch (a kernel that takes x and x.grad, reads the gradient and
writes x: an SGD or Adam step, warp.optim) read all zeros, where the backward before it had left a finite, nonzero
gradient: it consumed no gradient, and the training silently does nothing. The finding names the gradient, the
zero step with its line ("tape.zero() at train.py:40"), and the update launch with its line. Evidence: the
program's own zero step (tape.zero()) between backward and the update is an error; a clearing gradcheck does not
see as a zero step (x.grad.zero_(), fill_(0), a copy of zeros) is an error only when every update after that
backward read zeros (zeroing some params' gradients is how a program freezes them; the others still train), no
kernel of the program's own wrote the gradient in between (a projection onto constraints that pin every param is
all zero, and the program's answer), and it happened on every backward (on some only, it may be a freeze the
program means for a while: an info). Not a finding: the zero step after the update (the normal loop), a gradient
rewritten before the update and not zero (a clip, a projection), an update given a gradient buffer of its own.

Fix: zero the gradients after the update consumed them.

    tape.backward(loss)
    optimizer.step([x.grad])   # the update reads the gradient
    tape.zero()                # then clear it for the next backward
"""


@dataclass(frozen=True, eq=False)
class _Mutated(Record):
    """What both kinds share: the first pass (also ``iteration`` and its ``site``), the norm backward produced
    (ranked by it), the passes it happened on (``iterations``, ``count``), the family's members (``affected``), and
    the gradient's norm per such pass as backward left it and as it was read (``backward_norms``,
    ``readout_norms``: the keys before 0.1)."""

    first_pass: int
    produced_norm: float
    iterations: tuple[int, ...]
    affected: tuple[str, ...]
    iteration: int
    site: str | None
    count: int
    backward_norms: tuple[float, ...]
    readout_norms: tuple[float | None, ...]

    @property
    def subjects(self) -> tuple[str, ...]:
        return self.affected

    @property
    def rank(self) -> Measure | None:
        return Measure.of(self.produced_norm, "norm {:.3g}")


@dataclass(frozen=True, eq=False)
class RewrittenGradient(_Mutated):
    """The optimizer step (``writer``) rewrote the gradient in place before ``reader`` read it (``read_norm``)."""

    writer: str = ""
    reader: str = ""
    read_norm: float = 0.0


@dataclass(frozen=True, eq=False)
class ClearedGradient(_Mutated):
    """The gradient was cleared (by ``clearer``; None: a write not seen as a zero step) before ``update`` read it."""

    kind: str = "cleared-before-update"
    clearer: str | None = None
    update: str = ""


def _common(record, first, members, subjects: list[str], read) -> dict:
    mine = [hit for _rec, hit in members if hit.subject == first.subject]
    return {"first_pass": record.index, "produced_norm": first.produced_norm,
            "iterations": [rec.index for rec, _hit in members][:50], "affected": subjects, "iteration": record.index,
            "site": record.site, "count": len(members), "backward_norms": [h.produced_norm for h in mine][:50],
            "readout_norms": [read(h) for h in mine][:50]}  # fmt: skip


def check(trace: Trace, options=None) -> tuple[Finding, ...]:
    return _rewritten(trace) + _cleared(trace)


def _families(trace: Trace, kind: str):
    """The PassRecords' ``kind`` entries (rewrites, cleared), one group per indexed family of gradients: (the first
    hit's record, the first hit, every (record, hit), the subjects, the words for the family's other members)."""
    hits = [(record, hit) for record in trace.passes for hit in getattr(record, kind)]
    for _fam, members in group_by_family(hits, key=lambda h: h[1].subject).items():
        record, first = members[0]
        subjects = list(dict.fromkeys(hit.subject for _rec, hit in members))
        others = f" (and {len(subjects) - 1} more of the family)" if len(subjects) > 1 else ""
        yield record, first, members, subjects, others


def _rewritten(trace: Trace) -> tuple[Finding, ...]:
    findings = []
    for record, first, members, subjects, others in _families(trace, "rewrites"):
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
                evidence=RewrittenGradient(
                    writer=first.writer,
                    reader=first.reader,
                    read_norm=first.read_norm,
                    **_common(record, first, members, subjects, lambda hit: hit.read_norm),
                ),
            )
        )
    return tuple(findings)


def _cleared(trace: Trace) -> tuple[Finding, ...]:
    """Gradients cleared between backward and the update that read them, one finding per family."""
    findings = []
    for record, first, members, subjects, others in _families(trace, "cleared"):
        clearer = first.clearer or (
            "a write gradcheck does not see as a zero step (x.grad.zero_(), fill_(0) or a copy of zeros)"
        )
        backward = f"backward #{record.index}" + (f" ({short_site(record.site)})" if record.site else "")
        # an unseen clear on some backwards only may be a freeze the program means (zeroing a gradient for a while
        # to hold the param): no verdict; on every one it kept, the program never trains, seen or not
        meant = first.clearer is None and len({rec.index for rec, _c in members}) < len(trace.passes)
        findings.append(
            Finding(
                check=NAME,
                severity=Severity.INFO if meant else Severity.ERROR,
                subject=first.subject,
                message=(
                    f"{first.subject}{others}: {backward} produced norm {first.produced_norm:.4g}, then "
                    f"{clearer} cleared it before the update that consumes it: {first.update} read all zeros: "
                    f"it consumed no gradient, and the training silently does nothing "
                    f"({len(members)} of {trace.iterations or len(trace.passes)} {trace.units})"
                ),
                hint="zero the gradients after the update consumed them (move the zero step after the optimizer "
                "step: tape.backward(loss); optimizer.step(...); tape.zero())",
                evidence=ClearedGradient(
                    clearer=first.clearer,
                    update=first.update,
                    **_common(record, first, members, subjects, lambda hit: 0.0),
                ),
            )
        )
    return tuple(findings)
