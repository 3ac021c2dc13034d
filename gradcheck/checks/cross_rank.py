"""cross-rank: the replicas of a DistributedDataParallel job must stay copies of one model.

The evidence (gradcheck.pytorch.ranks, compared by pytorch.rank_compare) is read at audited optimizer steps of a
DDP-wrapped model under ``gradcheck exec`` run by torchrun or srun: every rank's fingerprints of each DDP
parameter and its gradient, swapped through the program's own store. A difference beyond float noise is an error
on every rank that sees it (``gradcheck combine`` shows it once, with the ranks); a step some rank never posted is no
verdict, said in a note. Under ``gradient_as_bucket_view=True``, a ``.grad`` replaced after DDP made it a view of its
bucket is a warning each rank judges alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gradcheck.model.evidence import Measure, Record
from gradcheck.model.findings import Finding, Severity
from gradcheck.model.trace import Trace

NAME = "cross-rank"
SUMMARY = "a DDP job's replicas must step on the same gradients and stay the same model"

EXPLAIN = """
What it means: DistributedDataParallel keeps one model on every rank by all-reducing each parameter's gradient
from the hook autograd runs as it accumulates into .grad. A gradient made any other way never reaches the
all-reduce, and a parameter written on some ranks only is no longer the others' copy: each replica steps on its
own, and the model the job saves is one rank's.

Evidence (exec under torchrun or srun, at audited optimizer steps of a DDP-wrapped model): every rank fingerprints
each DDP parameter's .grad as backward returns and as the optimizer steps, and the parameter before and after the
step (five sums each), and the ranks swap the fingerprints through the program's own store (no collective on its
process group, no wait while it trains; a rank that never posts makes that step no verdict). Two ranks agree when
every sum is within 1e-4 of its scale (64 units in the last place for bfloat16): DDP gives every rank the same
bytes, so correct code agrees to the bit.

Severity:
- gradient-diverged (error): a .grad differs across ranks as the optimizer steps. Named with its cause: autograd
  never reached the parameter, so DDP never reduced it, yet it has a gradient (a Warp kernel wrote
  wp.from_torch(p).grad inside a Function that captured p instead of taking it as an input), DDP left it out (frozen
  when DDP was built, unfrozen since), or no DDP forward armed the hooks (the model called through model.module, or
  a second backward over a retained graph); or it was equal when
  backward returned and written or replaced before the step (a term added after backward, through a Warp alias of
  p.grad or an assignment); the wp.from_torch call is named when there was one.
- gradient-missing (error): a .grad is None on some ranks and set on others as the optimizer steps.
- parameter-diverged (error): a parameter differs across ranks before the step while its gradient agrees (written
  outside the optimizer on some ranks), or the step itself makes it differ (the optimizers differ). Not reported
  for a parameter whose gradient diverged: that is its cause.
- bucket-detached (warning): with gradient_as_bucket_view=True, backward left .grad a view of DDP's bucket and the
  program replaced it before the step: DDP copies it back at the next backward, and a reference to the old .grad
  (a Warp array made of it) no longer sees the gradient.

Common causes: a term added to .grad after loss.backward() from this rank's own data (a Warp kernel writing
wp.from_torch(p.grad), an auxiliary loss's torch.autograd.grad assigned to .grad, a hand-written regulariser); a
forward through model.module (outside DDP: its hooks are not armed); a rank-dependent branch that clears .grad or writes the
parameters (rank 0 alone clamping, loading a checkpoint, or logging through a write); optimizers built differently
per rank.

Not judged (silent, no verdict): steps whose backward ran under no_sync(); parameters outside DDP
(parameters_to_ignore, frozen, rank-local modules); FSDP, ZeRO, tensor or pipeline parallelism; a parameter no
rank gave a gradient (unused under find_unused_parameters=True).

Fix: let autograd produce every gradient DDP should reduce (pass the parameter into the torch.autograd.Function and
return its gradient from backward), or all-reduce what you add yourself before the step
(dist.all_reduce(p.grad); p.grad /= world_size); write parameters alike on every rank, or broadcast them from rank 0.
"""


@dataclass(frozen=True, eq=False)
class CrossRankEvidence(Record):
    """Which ranks differ (``differing_ranks`` of ``world_size``; all of them when no two agree), at which audited
    backward's step, by how much (``spread``: the largest relative difference of their fingerprints), and the write
    named as the cause (``site``)."""

    kind: str
    backward: int
    differing_ranks: tuple[int, ...]
    world_size: int
    spread: float | None
    site: str | None

    @property
    def rank(self) -> Measure | None:
        return Measure.of(self.spread, "{:.3g} apart")


def check(trace: Trace, options=None) -> tuple[Finding, ...]:
    findings = []
    for divergence in trace.cross_rank:
        findings.append(
            Finding(
                check=NAME,
                severity=Severity.WARNING if divergence.kind == "bucket-detached" else Severity.ERROR,
                subject=divergence.subject,
                message=f"{divergence.kind}: {divergence.detail}",
                hint=divergence.fix,
                evidence=CrossRankEvidence(
                    divergence.kind,
                    divergence.backward,
                    divergence.ranks,
                    divergence.world_size,
                    _finite(divergence.spread) if divergence.kind != "bucket-detached" else None,
                    divergence.site,
                ),  # fmt: skip
            )
        )
    return tuple(findings)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None
