"""One audited step of a DDP job compared across its ranks: which gradients and parameters differ, and why.

The ranks' fingerprints (pytorch.ranks) are five float sums of a tensor (its sum, the sum of its magnitudes, of its
squares, and two strided sub-sums, so a difference that keeps the norm still moves a sum), never the tensor. Two
ranks agree on a tensor when every sum differs by at most ``bound`` of its scale (the larger rank's sum of
magnitudes, or of squares): ``bound`` is 1e-4, or 64 units in the last place of the tensor's dtype where that is
larger (bfloat16). DDP's all-reduce hands every rank the same bytes (gloo and NCCL both end with every rank holding
one reduced result), and every rank then runs the same elementwise step, so correct code agrees to the bit; the bound
is there for a job whose ranks sum in a different order (mixed hardware), never to catch a small real difference. A
difference below it is no finding: a miss is cheaper than a false error.

What is compared, per DDP parameter the step's optimizer holds:

- its ``.grad`` as the optimizer steps (``gs``): present on some ranks only is ``gradient-missing``; different values
  are ``gradient-diverged``. The cause is local: the same ``.grad`` when backward returned (``gb``, after DDP's
  all-reduce) says whether it was written during the backward (autograd never reached the parameter, so DDP never
  reduced it) or after it (replaced, or written in place before the step), and the Warp alias of it, if one was made;
- the parameter itself before the step (``pb``: written outside the optimizer since) and after it (``pa``: the
  optimizers differ) is ``parameter-diverged``, unless its gradient already diverged (the cause is reported, not its
  consequence).

Pure Python: the ranks' payloads are plain JSON.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gradcheck.model.trace import RankDivergence

BOUND = 1e-4
ULPS = 64


@dataclass(frozen=True)
class Local:
    """What this rank knows of one parameter's window that no other rank needs: the names and causes."""

    name: str  # the parameter, as the report names it
    step: str  # the optimizer step that read it ("SGD.step() (train.py:88)")
    reached: bool  # this backward's autograd graph reached it (so DDP's hook reduced it)
    replaced: bool  # its .grad at the step is not the tensor backward left
    bypassed: bool  # no DDP forward ran for this backward (the model called through .module): nothing all-reduced
    sites: tuple[str, ...] = ()  # wp.from_torch calls that aliased its .grad (or it, with its gradient)
    param_sites: tuple[str, ...] = ()  # wp.from_torch calls that aliased the parameter's memory
    excluded: bool = False  # frozen (requires_grad=False) when DDP was built: DDP never reduces it


def agree(a: list | None, b: list | None, eps: float) -> tuple[bool, float]:
    """Whether two fingerprints agree within the noise bound, and their largest relative difference."""
    if a is None or b is None:
        return a is b, math.inf if a is not b else 0.0
    bound = max(BOUND, ULPS * eps)
    scale = max(abs(a[1]), abs(b[1]))
    squares = max(abs(a[2]), abs(b[2]))
    worst = 0.0
    for k, (x, y) in enumerate(zip(a, b, strict=True)):
        if math.isnan(x) or math.isnan(y) or math.isinf(x) or math.isinf(y):
            if not (x == y or (math.isnan(x) and math.isnan(y))):
                return False, math.inf
            continue
        size = squares if k == 2 else scale
        difference = abs(x - y) / size if size > 0 else (0.0 if x == y else math.inf)
        worst = max(worst, difference)
    return worst <= bound, worst


def groups(values: dict[int, list | None], eps: float) -> tuple[list[list[int]], float]:
    """The ranks in groups that agree (each group's first rank is its representative), largest first, and the
    largest relative difference between representatives."""
    found: list[list[int]] = []
    spread = 0.0
    for rank in sorted(values):
        for group in found:
            same, difference = agree(values[group[0]], values[rank], eps)
            if same:
                group.append(rank)
                break
            spread = max(spread, difference)
        else:
            found.append([rank])
    found.sort(key=len, reverse=True)
    return found, spread


def odd_ones(found: list[list[int]]) -> tuple[int, ...]:
    """The ranks that differ from the others: outside the one largest group, or all when no group is largest."""
    if len(found) > 1 and len(found[0]) > len(found[1]):
        return tuple(sorted(r for group in found[1:] for r in group))
    return tuple(sorted(r for group in found for r in group))


def compare(index: int, payloads: dict[int, dict], local: dict[str, Local]) -> list[RankDivergence]:
    """Every difference across the ranks' payloads of audited backward ``index``."""
    world = len(payloads)
    found = []
    for key in sorted(local):
        entries = {rank: payload.get(key) for rank, payload in payloads.items()}
        if any(entry is None for entry in entries.values()) or len({e["n"] for e in entries.values()}) != 1:
            continue  # not a DDP parameter on every rank, or not the same one: no verdict
        eps = max(entry["e"] for entry in entries.values())
        info = local[key]
        divergence = _gradient(index, {r: e["gs"] for r, e in entries.items()}, entries, eps, info, world)
        if divergence is None:
            divergence = _parameter(index, entries, eps, info, world)
        if divergence is not None:
            found.append(divergence)
    return found


def _gradient(index, at_step, entries, eps, info: Local, world) -> RankDivergence | None:
    subject = f"{info.name}.grad"
    having = tuple(r for r, g in at_step.items() if g is not None)
    if having and len(having) < len(at_step):
        lacking = tuple(r for r in sorted(at_step) if r not in having)
        return RankDivergence(
            kind="gradient-missing", subject=subject, backward=index, ranks=lacking, world_size=world,
            detail=f"as {info.step} steps after backward #{index}, {subject} is None on rank(s) "
            f"{_list(lacking)} and set on rank(s) {_list(having)}: the optimizer moves {info.name} on some ranks "
            "only, and the replicas stop being copies of one model",
            fix=f"give {info.name} a gradient on every rank or on none (a rank-dependent branch that sets or clears "
            ".grad, or a gradient written outside autograd on some ranks only)",
        )  # fmt: skip
    if not having:
        return None
    found, spread = groups(at_step, eps)
    if len(found) == 1:
        return None
    after_backward, _ = groups({r: e["gb"] for r, e in entries.items()}, eps)
    cause, site = _cause(info, reduced=len(after_backward) == 1)
    ranks = odd_ones(found)
    return RankDivergence(
        kind="gradient-diverged", subject=subject, backward=index, ranks=ranks, world_size=world,
        detail=f"{subject} differs across ranks (rank(s) {_list(ranks)} of {world}; relative difference "
        f"{spread:.3g}) as {info.step} steps after backward #{index}: {cause}. Each replica steps on its own "
        "gradient and they drift apart",
        fix=_fix(subject, info),
        site=site, spread=spread,
    )  # fmt: skip


def _fix(subject: str, info: Local) -> str:
    if info.excluded:
        return (
            f"wrap the model in DistributedDataParallel after unfreezing {info.name} (or freeze it by leaving it out "
            "of the optimizer, not with requires_grad=False before DDP is built)"
        )
    if info.bypassed:
        return (
            "run every backward whose gradients train the model after its own forward through the "
            "DistributedDataParallel model (model(x), not model.module(x); a fresh forward, not retain_graph=True)"
        )
    return (
        f"let autograd produce {subject} (return it from the torch.autograd.Function's backward, so DDP's hook "
        "all-reduces it), or all-reduce what you add yourself (dist.all_reduce(p.grad); p.grad /= world_size) "
        "before the step"
    )


def _cause(info: Local, reduced: bool) -> tuple[str, str | None]:
    site = info.sites[0] if info.sites else None
    by = f", by Warp through the wp.from_torch alias made at {site}" if site else ""
    if reduced:
        how = "replaced (.grad = ...)" if info.replaced else "written in place"
        return (
            f"it was equal on every rank when backward returned (DDP's all-reduce) and was {how} between backward "
            f"and the step with values that differ per rank{by}",
            site,
        )
    if info.excluded:
        return (
            f"DDP left {info.name} out when it was built (requires_grad was False then: frozen, and unfrozen since), "
            f"so it never all-reduces its gradient{by}",
            site,
        )
    if info.bypassed:
        return (
            "no DistributedDataParallel forward armed DDP's hooks for this backward: the model was called through "
            ".module (outside DDP), or this backward runs over a graph an earlier backward already used "
            f"(retain_graph=True: DDP reduces once per forward), so nothing of it was all-reduced{by}",
            site,
        )
    if not info.reached:
        return (
            f"autograd never reached {info.name} in this backward, so DDP never all-reduced it (to DDP it is unused), "
            f"yet it has a gradient: it was written outside autograd{by}",
            site,
        )
    return (
        f"it already differed when backward returned, though autograd reached {info.name}: DDP did not finish "
        "reducing it (another parameter of its bucket got no gradient in this backward, under "
        f"find_unused_parameters=False), or something wrote it during the backward outside autograd{by}",
        site,
    )


def _parameter(index, entries, eps, info: Local, world) -> RankDivergence | None:
    before, spread = groups({r: e["pb"] for r, e in entries.items()}, eps)
    if any(e["pb"] is None for e in entries.values()):
        return None
    if len(before) > 1:
        ranks = odd_ones(before)
        site = info.param_sites[0] if info.param_sites else None
        how = (
            f"Warp wrote it through the wp.from_torch alias made at {site} (on some ranks only, or with values that "
            "differ per rank)"
            if site
            else "it was written outside the optimizer on some ranks (through .data, a Warp kernel on wp.from_torch "
            "of it, a rank-dependent branch, a checkpoint loaded on one rank), or an earlier step diverged"
        )
        detail = (
            f"{info.name} differs across ranks (rank(s) {_list(ranks)} of {world}; relative difference {spread:.3g}) "
            f"before {info.step} after backward #{index}, while its gradient agrees: {how}"
        )
        fix = f"write {info.name} alike on every rank, or broadcast it from rank 0 (dist.broadcast) after a rank-local write"
        return RankDivergence("parameter-diverged", info.name, index, ranks, world, detail, fix, site, spread)
    after, spread = groups({r: e["pa"] for r, e in entries.items()}, eps)
    if len(after) == 1 or any(e["pa"] is None for e in entries.values()):
        return None
    ranks = odd_ones(after)
    detail = (
        f"{info.name} and its gradient agree across ranks before {info.step} after backward #{index}, and the step "
        f"makes it differ (rank(s) {_list(ranks)} of {world}; relative difference {spread:.3g}): the optimizers "
        "differ across ranks (a rank-dependent learning rate, optimizer state loaded on one rank, or state such as "
        "Adam's moments built from gradients that differed at a step not audited)"
    )
    fix = "build the optimizer alike on every rank and load its state on every rank"
    return RankDivergence("parameter-diverged", info.name, index, ranks, world, detail, fix, spread=spread)


def _list(ranks) -> str:
    return ", ".join(str(r) for r in ranks)
