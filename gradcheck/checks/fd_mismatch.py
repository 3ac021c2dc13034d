"""fd-mismatch: the tape's gradient disagrees with central finite differences of the loss.

Reads the finite-difference probe the runner ran after the passes (gradcheck.rerun.finite_diff): the
worst relative error of the directional derivatives (fast mode) and, when fast mode failed or
``--fd elements`` asked for it, the worst single element, named by path with its AD and FD values.
Bands: warning from 1e-2 (warp.autograd's rtol), error from 1e-1; both configurable.

Only a disagreement beyond the loss's measured noise, by an estimate that converged (three consecutive step
sizes agreeing, at the smallest the noise allows), or by estimates that are all on the other side of zero from the
tape (each beyond its noise, the nearest farther from the tape than their spread), is a warning or an error. When
finite differences never settled the check says so at info level: that is "cannot tell", and a gradient checker
that fails correct code gets switched off.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gradcheck.model.evidence import Measure, Record, largest
from gradcheck.model.findings import Finding, Severity
from gradcheck.model.trace import Probe, Trace

NAME = "fd-mismatch"
SUMMARY = "the tape's gradient must agree with central finite differences of the loss"
# what exec cannot give it (JUnit lists it as skipped with this reason, never as a pass)
UNDER_EXEC = "needs gradcheck run: it evaluates the loss again at perturbed params, and a program runs once"

EXPLAIN = """
What it means: the tape's gradient disagrees with central finite differences of the loss, along random
directions (fast mode) or for single elements (the worst one is named). The difference quotient is trusted only
when it converged: to agree with the tape, estimates at two neighbouring step sizes agree within the loss's
noise; to disagree, three do, at the smallest steps the noise allows, or the estimates at every step (three at
least) have the sign opposite to the tape's, each beyond its noise, and even the nearest is farther from the tape
than they are from each other (a loss that scatters with the step, as a ray tracer's does across pixel edges).

How the judge works: a first central difference at a step of 1e-2 (relative to each param's scale) that agrees
with the tape ends the check. On a disagreement gradcheck measures the loss's computational noise (Moré & Wild's
ECnoise: nine rollouts a tiny step apart and a difference table) and tries larger and smaller steps whose noise
error is well below the band. Float32 rollouts are noisy: in Newton's 1,920-step cloth the noise is ~6e-5 in a loss
of 271.6, so a step of 1e-4 gives an estimate off by ~0.4 while steps of 1e-1 to 3e-3 agree to 3%. "fd": {"noise_floor"}
in the JSON is the smallest disagreement the noise lets the check see; an error of 0.0 means "below the floor".

Not a verdict on the gradient:
- "finite differences did not settle" (info): no two step sizes agreed; the loss is too noisy or too non-smooth
  along that probe (contacts, clamps, branches). Try --fd elements, or a shorter horizon.
- "the loss has a kink at the params" (info): the one-sided differences stay apart at every small step, so the
  derivative does not exist there (a contact exactly at rest, a zero velocity putting a semi-Lagrangian back-trace
  on a grid node, max/clamp/floor at its switch). The tape returns one side's derivative, central differences the
  average; neither is wrong.
- Steps that straddle a kink farther away can agree on a value that is not the derivative (two large steps across
  a contact): a disagreement is only judged at the smallest steps the noise allows.
- State carried between calls (an accumulator not cleared, a start state overwritten, a clock not reset; see
  stateful-forward): every rollout starts from the state the first pass started from (the arrays the scenario
  holds are put back), so the finite differences measure the function the tape differentiated. When that is not
  enough (state in a Python attribute) the loss still differs at the same params: "forward() is not a function of
  the params", and the finite differences are skipped.
- Warp's dynamic loops: a value defined before a loop whose trip count is known only at run time and used after
  it gets a zero adjoint (NVIDIA/warp#729 family, live on 1.19). Finite differences see the true derivative, so this
  check fires on correct-looking code: unroll the loop (wp.static range) or carry the value in an array.

Common causes: (of a real mismatch) a wrong @wp.func_grad custom adjoint; buffers rewritten between forward and
backward (see write-after-read and reentrancy: shared solver scratch); non-differentiable operations (clamps,
branches, integer casts) on the path; a kernel with enable_backward=False.

Fix: check the custom adjoint of the element named, or give each step its own buffers.

    @wp.func_grad(energy)
    def adj_energy(v: wp.vec3, adj_ret: float):
        wp.adjoint[v] += wp.vec3(2.0 * v[0], 2.0 * v[1] * v[2], v[1] * v[1] + 1.0) * adj_ret
"""


def check(trace: Trace, options=None) -> tuple[Finding, ...]:
    fd = trace.fd
    if fd is None or fd.skipped:
        return ()
    if fd.disagrees:  # judged against the warning and error bands the FDResult was run with
        finding = _mismatch(fd, [p for p in fd.directions if p.converged], [p for p in fd.elements if p.converged])
        return (_explained(finding, trace),)
    unsettled = [p for p in fd.probes if not p.converged]
    if unsettled:  # the rest agreed, but part of the check had no verdict: say so rather than imply it passed
        return (_unsettled(fd, max(unsettled, key=lambda p: (p.kink is not None, p.rel_error))),)
    return ()


def _mismatch(fd, directions: list[Probe], elements: list[Probe]) -> Finding:
    worst_dir = max(directions, key=lambda p: p.rel_error, default=None)
    worst_el = max(elements, key=lambda p: p.rel_error, default=None)
    score = max(worst_dir.rel_error if worst_dir else 0.0, worst_el.rel_error if worst_el else 0.0)
    severity = Severity.ERROR if score >= fd.error else Severity.WARNING
    parts = []
    if worst_dir is not None:
        parts.append(
            f"directional derivative off by up to {worst_dir.rel_error:.3g} (relative, beyond noise) over "
            f"{len(fd.directions)} random directions: tape {worst_dir.ad:.6g} vs finite difference {worst_dir.fd:.6g} "
            f"(eps {worst_dir.eps:g}{_settled(worst_dir)})"
        )
    if worst_el is not None:
        parts.append(
            f"worst element {worst_el.label}: AD {worst_el.ad:.6g} vs FD {worst_el.fd:.6g} "
            f"(abs {worst_el.abs_error:.3g}, rel {worst_el.rel_error:.3g}{_settled(worst_el)})"
        )
    return Finding(
        check=NAME,
        severity=severity,
        subject=worst_el.label if worst_el is not None else "directional derivative",
        message="; ".join(parts),
        hint=(
            "a wrong custom adjoint (@wp.func_grad), buffers rewritten between forward and backward "
            "(see write-after-read / reentrancy), or a non-differentiable operation; inspect the element named"
        ),
        evidence=_evidence(fd),
    )


def _explained(finding: Finding, trace: Trace) -> Finding:
    """Name the cause other checks found on the same run, ahead of the generic list."""
    from dataclasses import replace

    changed = [c for r in trace.passes for c in r.changed]
    rewrites = [h for r in trace.passes for h in r.hazards]
    blame = trace.launch_checks if trace.launch_checks is not None and not trace.launch_checks.skipped else None
    wrong = [v for v in blame.verdicts if v.status in ("mismatch", "assigns")] if blame else []
    pointers = sorted({i.subject for r in trace.passes for i in r.pointer_issues if i.in_tape})
    tested = sum(v.status in ("ok", "split") for v in blame.verdicts) if blame else 0
    if pointers:
        cause = f"struct adjoint pointers that miss the live gradient: {', '.join(pointers[:3])} (see stale-adjoint)"
        hint = "backward writes into other buffers than the ones read back: fix the struct fields named"
    elif breaks := [b for r in trace.passes for b in r.breaks]:
        cause = f"the chain from {breaks[0].param} to the loss breaks: {breaks[0].detail} (see missing-gradient)"
        hint = breaks[0].fix
    elif wrong and not changed:
        from gradcheck.checks.adjoint_mismatch import fix_for, launch_label

        worst = max(wrong, key=lambda v: (v.status == "assigns", v.rel_error))
        cause = f"{launch_label(worst)} has a wrong adjoint (see adjoint-mismatch)"
        hint = fix_for(worst)
    elif changed:
        names = ", ".join(c.subject for c in changed[:3])
        cause = f"arrays changed before backward: {names} (see changed-before-backward)"
        hint = f"backward differentiated other values than the forward saw: change {changed[0].subject} only after backward"
    elif rewrites:
        names = ", ".join(sorted({r.array for r in rewrites})[:3])
        cause = f"buffers rewritten between forward and backward: {names} (see write-after-read)"
        hint = "give each step its own buffers, so every launch's adjoint sees the values its forward read"
    elif leftovers := _leftovers(trace):
        cause = (
            f"gradients left over from an earlier backward: {', '.join(leftovers[:3])} (see zero-audit, accumulation)"
        )
        hint = "clear every gradient the tape reaches between backward calls (tape.zero(), and the arrays it misses)"
    elif suspects := _suspects(trace, blame):
        from gradcheck.checks.adjoint_mismatch import launch_label

        verdict, where, construct, rewrite = suspects[0]
        cause = (
            f"{launch_label(verdict)} could not be judged alone (its finite differences did not settle) and holds a "
            f"construct Warp differentiates wrongly: {where}: {construct} (see adjoint-mismatch)"
        )
        hint = f"rewrite it: {rewrite}" if rewrite else "check that launch's adjoint"
    elif blame is not None and tested:
        untested = sum(v.status in ("not-checked", "no-verdict") for v in blame.verdicts)
        cause = (
            f"no launch disagrees ({tested} tested alone or with their neighbours, {untested} without a verdict): "
            "look at what the launches do not see (arrays changed outside kernels, state carried between calls)"
        )
        hint = "the adjoints of the launches tested are right; see the evidence for the launches without a verdict"
    else:
        return finding
    return replace(
        finding,
        message=f"{finding.message}; likely cause: {cause}",
        hint=hint,
        evidence=finding.evidence.extended(cause=cause),
    )


def _suspects(trace: Trace, blame) -> list[tuple]:
    """(verdict, where, construct, rewrite) of launches without a verdict whose kernel holds a construct the
    running Warp differentiates wrongly (gradcheck.source.kernel_patterns), the blamed launches' evidence aside."""
    from gradcheck.checks.adjoint_mismatch import live_suspects
    from gradcheck.model.sites import short_site

    return [
        (v, short_site(where) or "?", construct, rewrite)
        for v in (blame.verdicts if blame is not None else ())
        if v.status == "no-verdict"
        for _bug, where, construct, rewrite in live_suspects(trace, v)
    ]


def _leftovers(trace: Trace) -> list[str]:
    """Gradient buffers nonzero after the first pass's zero step that a later backward did add to."""
    first = trace.passes[0] if trace.passes else None
    later = trace.passes[1] if len(trace.passes) > 1 else None
    if first is None:
        return []
    kept = set(later.kept_by_backward) if later is not None else set()
    return [s.subject for s in first.survivors if s.subject not in kept]


def _unsettled(fd, probe: Probe) -> Finding:
    if probe.kink is not None:
        return _kink(fd, probe)
    estimates = ", ".join(f"{s.fd:.4g} (eps {s.eps:g})" for s in probe.steps)
    return Finding(
        check=NAME,
        severity=Severity.INFO,
        subject=probe.label,
        message=(
            f"finite differences did not settle, so there is no verdict on the gradient here: tape {probe.ad:.6g}, "
            f"FD {estimates}; no two step sizes agreed within the loss's noise"
            + (f" (sigma {fd.noise_level:.3g} in a loss of {fd.loss:.6g})" if fd.noise_level is not None else "")
        ),
        hint="the loss is too noisy or not smooth along this probe; try --fd elements or a shorter horizon",
        evidence=_evidence(fd),
    )


def _kink(fd, probe: Probe) -> Finding:
    left, right = probe.kink
    side = _side(probe.ad, left, right)
    return Finding(
        check=NAME,
        severity=Severity.INFO,
        subject=probe.label,
        message=(
            f"the loss has a kink at the params along this probe, so it has no derivative there to check: one-sided "
            f"derivatives {left:.6g} (left) and {right:.6g} (right) at every small step, central differences "
            f"{probe.fd:.6g}, tape {probe.ad:.6g}"
            + (f" (the {side} side's, as floor/max/clamp/contact branches give)" if side else "")
        ),
        hint=(
            "nothing to fix when the kink is real (a contact at rest, a grid-node back-trace, a clamp at its bound); "
            "move the params off it (e.g. a small nonzero initial value) to get a verdict"
        ),
        evidence=_evidence(fd),
    )


def _side(ad: float, left: float, right: float) -> str | None:
    """Which one-sided derivative the tape's value is (within 5% of the gap between them), if either."""
    close = 0.05 * abs(right - left)
    if abs(ad - right) <= close:
        return "right"
    if abs(ad - left) <= close:
        return "left"
    return None


def _settled(probe: Probe) -> str:
    values = [s.fd for s in probe.steps if math.isfinite(s.fd)]
    if len(values) > 1 and all(v * probe.ad < 0 for v in values):
        # what one-sided evidence agrees on (the judge's fd_evidence.one_sided): the sign, not the value
        which = "" if len(values) == len(probe.steps) else " with a finite estimate"
        return (
            f", opposite in sign to the tape at all {len(values)} step sizes{which}: "
            f"{min(values):.4g} to {max(values):.4g}"
        )
    return f", converged over {len(probe.steps)} step sizes" if len(probe.steps) > 1 else ""


@dataclass(frozen=True, eq=False)
class FDEvidence(Record):
    """The finite-difference check's probes (``directions``, ``elements`` worst first) against the tape, the
    loss's noise, the thresholds; ranked by the worst relative error; ``cause`` what other checks explain it by."""

    mode: str
    max_direction_error: float | None
    directions: tuple[dict, ...]
    elements: tuple[dict, ...]
    rollouts: int
    loss: float | None
    noise_level: float | None
    noise_floor: float | None
    converged: bool | None
    warn: float
    error: float
    cause: str | None = None
    OPTIONAL = frozenset({"cause"})

    @property
    def rank(self) -> Measure | None:
        errors = [largest(self.elements, "rel_error"), self.max_direction_error]
        return Measure.of(largest([e for e in errors if e is not None]), "rel {:.3g}")


def _evidence(fd) -> FDEvidence:
    return FDEvidence(
        mode=fd.mode,
        max_direction_error=max((p.rel_error for p in fd.directions), default=None),
        directions=[_probe(p) for p in fd.directions],
        elements=[_probe(p) for p in sorted(fd.elements, key=lambda p: -p.rel_error)],
        rollouts=fd.rollouts,
        loss=fd.loss,
        noise_level=fd.noise_level,
        noise_floor=fd.noise_floor,
        converged=fd.converged,
        warn=fd.warn,
        error=fd.error,
    )


def _probe(p: Probe) -> dict:
    return {
        "label": p.label,
        "ad": p.ad,
        "fd": p.fd,
        "eps": p.eps,
        "rel_error": p.rel_error,
        "abs_error": p.abs_error,
        "noise_floor": p.noise_floor,
        "converged": p.converged,
        "steps": [{"eps": s.eps, "fd": s.fd, "noise": s.noise} for s in p.steps],
        "kink": list(p.kink) if p.kink else None,
    }
