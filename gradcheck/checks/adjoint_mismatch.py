"""adjoint-mismatch: a launch whose adjoint is not the transpose of its own Jacobian.

fd-mismatch sees the symptom on the whole program; this names the launch. Each launch on the tape is
replayed on the values it really ran on and tested alone (gradcheck.rerun.launch_check): random output
weights w, the program's own tangent u of its inputs, <w, dF/du> by noise-aware central differences against
<J^T w, u> from its adjoint, and the adjoint must add to the input gradients it is given, not overwrite them.
A launch that fails alone but passes together with the launches around it has a split adjoint (Newton's
Featherstone Cholesky and solve): info, not a bug.
"""

from __future__ import annotations

from dataclasses import dataclass

from gradcheck.model import known_bugs
from gradcheck.model.evidence import BlamedLaunch, Mark, Measure, Record, largest
from gradcheck.model.findings import Finding, Severity
from gradcheck.model.known_bugs import COPY_ADJOINT_ASSIGNS
from gradcheck.model.sites import short_site
from gradcheck.model.trace import LaunchVerdict, Trace, not_checked_reasons

NAME = "adjoint-mismatch"
SUMMARY = "each launch's adjoint must be the transpose of its Jacobian and add to the input gradients"
# what exec cannot give it (JUnit lists it as skipped with this reason, never as a pass)
UNDER_EXEC = "turned off by --no-adjoint-test: it tests each kernel's launches against their own finite differences"

EXPLAIN = """
What it means: replayed alone on the values it ran on in the forward, this launch's adjoint disagrees with
central differences of the launch itself (a dot-product test: random output weights, the direction the
program's params move its inputs in), or it overwrites the input gradients it is given instead of adding to
them. The launch is named with its kernel and the file and line of the wp.launch call.

When it runs: under `gradcheck exec` and `gradcheck.audit()`, by default on the first audited launch of each
kernel (again when its argument types change, or when a loop bound it reads at run time first makes the loop
iterate more than once; --no-adjoint-test: off), with `exec --blame` on every launch of one backward; under
`gradcheck run`, by itself when fd-mismatch finds a converged disagreement (to name the launch responsible), or
always with --blame always (also `gradcheck blame SPEC`). An error needs a converged disagreement (three agreeing
steps above float32 noise, not at a detected kink); under exec's default test a launch that fails alone is an
error only once tested with its neighbours (a split adjoint ruled out), else no verdict. A launch flat in float32
where Warp's own adjoint is not (rounding of an intermediate value: a large offset cancelled) is no verdict. A
hand-written adjoint (@wp.func_grad, a native adjoint snippet) that disagrees is an error only where the program
trains through it and the disagreement is not a surrogate's shape (flat where the adjoint is not: a straight-through
estimator; a constant negative ratio: a gradient reversal); otherwise an info naming the function. Only inputs whose values depend on the params and
outputs the loss depends on are tested: derivatives no gradient flows through are not the program's business.

A suspect (info): when fd-mismatch found the program's gradient wrong and no launch disagrees, a launch whose own
finite differences never settle (hard edges, contacts) and whose kernel holds such a construct; nothing measured
it wrong (correct kernels hold such loops too: Newton's Featherstone), and fd-mismatch names it as the likely
cause.

Not a bug: "split adjoint" (info): a launch whose adjoint is computed by its neighbours' (Newton's Featherstone:
the Cholesky adjoint is a no-op, the solve's adjoint covers both); tested together they agree.
What it reaches: every kernel launch, whatever its arguments: struct arguments (each array field, nested
structs and arrays of structs included, perturbed and weighed with its forward-time values), in-place launches
(an input the kernel also writes: perturbed at the value it had before, weighed at the value it left, replayed
as Warp's backward replays it, on the overwritten values), tile kernels (wp.launch_tiled, block_dim). A kernel
built with enable_backward=False that lies on the gradient path is named (warning: Warp's backward skips it
and every gradient through it is dropped). Not checked, each with its reason counted in the blame table and
the evidence: launches past the memory budget for copies, launches made during CUDA graph capture (nothing can
be copied then: run without capture, e.g. --device cpu, to check them), launches with no float input on the
path from the params or no float output the loss depends on. Tape entries that are not launches (the adjoint
wp.copy records behind wp.clone and array.assign, which before Warp 1.17 overwrote the source's gradient; any
tape.record_func backward) have no forward to replay: they are tested for accumulation only, each gradient
prefilled at random, and named by where they were recorded.

A custom torch.autograd.Function (exec and audit() on a PyTorch program) is tested once, on copies of its first
call's inputs, against central differences of its own forward: an error when its backward runs Warp (a tape
backward, adjoint launches) and disagrees (fix its backward); an info, "a possible surrogate gradient", when its
backward is pure torch or the disagreement has a surrogate's shape (a flat forward: straight-through estimators;
the derivative reversed: gradient reversal; both wrong on purpose); no verdict when
its forward draws random numbers or writes its inputs or other state it reaches (all of it is put back).

Common causes: a wrong @wp.func_grad; a value defined before a loop whose trip count is known only at run time
(a struct field, an argument, array.shape) and used after it (NVIDIA/warp#729 family, live on every release so
far: the finding names the line and the rewrite, a constant bound of at most max_unroll with a guard, or
wp.static); a non-additive in-place update x[i] = x[i] * a[i] (Warp's backward replays it with the overwritten
x: write to a separate output array); a custom backward that assigns (adj = ...) instead of accumulating
(adj += ...). On old Warp, upstream bugs the finding names with the line: a conditional expression whose
branches read the same element (1.16.0), a kernel opting in to enable_backward=True in a module built with it
off (up to 1.17.0).

Fix: correct the custom adjoint of the kernel named.

    @wp.func_grad(energy)
    def adj_energy(v: wp.vec3, adj_ret: float):
        wp.adjoint[v] += wp.vec3(2.0 * v[0], 2.0 * v[1] * v[2], v[1] * v[1]) * adj_ret   # += and the right terms
"""


def check(trace: Trace, options=None) -> tuple[Finding, ...]:
    blame = trace.launch_checks
    if blame is None or blame.skipped:
        return ()
    warn, error = (trace.fd.warn, trace.fd.error) if trace.fd is not None else (1e-2, 1e-1)
    by_kernel: dict[str, list[LaunchVerdict]] = {}
    for verdict in blame.verdicts:
        by_kernel.setdefault(verdict.kernel, []).append(verdict)
    findings = []
    for kernel, verdicts in by_kernel.items():
        bad = [v for v in verdicts if v.status in ("mismatch", "assigns") and not maybe_meant(v)]
        meant = [v for v in verdicts if v.status == "mismatch" and maybe_meant(v)]
        if bad:
            findings.append(_wrong(trace, blame, kernel, verdicts, bad, warn, error))
        elif meant:
            findings.append(_hand_written(blame, kernel, verdicts, meant, warn))
        # only where the program's gradient is measured wrong: Newton's Featherstone has such loops, and is right
        known_wrong = trace.fd is not None and trace.fd.disagrees
        unsettled = [v for v in verdicts if v.status == "no-verdict" and live_suspects(trace, v)] if known_wrong else []
        if unsettled and not bad:
            findings.append(_suspected(trace, blame, kernel, verdicts, unsettled, warn))
        dropped = [v for v in verdicts if v.status == "no-backward"]
        if dropped:
            findings.append(
                Finding(
                    check=NAME,
                    severity=Severity.WARNING,
                    subject=launch_label(dropped[0]),
                    message=f"{len(dropped)} of {len(verdicts)} launches of {kernel} are {dropped[0].note}",
                    hint=f"remove enable_backward=False from {kernel} (or its module) if gradients should flow "
                    "through it; leave it if the cut is meant (a stop-gradient)",
                    evidence=_evidence(blame, verdicts, dropped, warn),
                )
            )
    split = [v for v in blame.verdicts if v.status == "split"]
    if split:
        kernels = sorted({v.kernel for v in split})
        findings.append(
            Finding(
                check=NAME,
                severity=Severity.INFO,
                subject=launch_label(split[0]),
                message=f"{len(split)} launches of {', '.join(kernels)} fail alone but pass with their neighbours: "
                f"a split adjoint, not a bug ({split[0].note})",
                hint="nothing to fix",
                evidence=_evidence(blame, split, split, warn),
            )
        )
    findings += [_surrogate(blame, v, warn) for v in blame.verdicts if v.status == "surrogate"]
    return tuple(findings)


def _wrong(trace: Trace, blame, kernel: str, verdicts, bad, warn: float, error: float) -> Finding:
    """The finding for a kernel with wrong launches: the worst one, what it does wrong, the construct in its source
    that Warp mishandles (line and rewrite) when there is one."""
    assigns = [v for v in bad if v.status == "assigns"]
    worst = max(bad, key=lambda v: (v.status == "assigns", v.rel_error))
    severity = Severity.ERROR if assigns or worst.rel_error >= error else Severity.WARNING
    if worst.status == "assigns":
        what = worst.note or "overwrites the input gradients it is given instead of adding to them"
    else:
        what = (
            f"disagrees with central differences of the launch: adjoint {worst.ad:.6g} vs FD {worst.fd:.6g} "
            f"(rel {worst.rel_error:.3g})"
        )
        if worst.note:
            what += f": {worst.note}"
    if kernel.startswith("wp.copy") and COPY_ADJOINT_ASSIGNS.affects(trace.warp_version):
        what += f"; {COPY_ADJOINT_ASSIGNS.note(trace.warp_version)}"
    rewrites = []
    for bug, where, construct, rewrite in live_suspects(trace, worst):
        if rewrite and not hasattr(bug, "fixed_in"):  # wrong on every release: the rewrite is the fix, said once
            what += f"; {short_site(where) or kernel}: {construct}: {bug.issue}, wrong on every Warp release so far"
        else:
            what += f"; {short_site(where) or kernel}: {construct}: {bug.note(trace.warp_version)}"
        if rewrite:
            rewrites.append(f"at {short_site(where) or kernel}: {rewrite}")
    return Finding(
        check=NAME,
        severity=severity,
        subject=launch_label(worst),
        message=f"{len(bad)} of {len(verdicts)} launches of {kernel} have a wrong adjoint; the worst, "
        f"{launch_label(worst)}, {what}",
        hint="; ".join(rewrites) if rewrites else fix_for(worst),
        evidence=_evidence(blame, verdicts, bad, warn),
    )


def maybe_meant(verdict: LaunchVerdict) -> bool:
    """A disagreement of a hand-written adjoint (@wp.func_grad, a native adjoint snippet) that may be deliberate:
    the program does not train through it (a test of the custom-gradient mechanism, a probe of a Jacobian), or its
    shape is a surrogate's: the function is (nearly) flat where the adjoint is not (a straight-through estimator,
    also beside a smooth term of the same kernel) or the adjoint points against the derivative (a gradient reversal,
    of any strength). A hand-written adjoint a training program learns from, of any other shape (a forgotten
    factor, a dropped term, a zero), is a bug like Warp's own."""
    if verdict.status != "mismatch" or not verdict.custom_adjoint:
        return False
    if verdict.trained is False:
        return True
    probes = verdict.probes or ((verdict.ad, verdict.fd),)
    # a straight-through estimator, alone or beside a smooth term: flat along every probe where the adjoint is not
    flat = all(abs(fd) <= 0.05 * abs(ad) for ad, fd in probes)
    # a gradient reversal, of any strength: one negative ratio along every probe (a forgotten factor gives ratios
    # that differ from probe to probe, of either sign)
    ratios = [ad / fd for ad, fd in probes if fd != 0.0]
    reversed_ = len(ratios) == len(probes) >= 2 and all(r < 0 for r in ratios) and max(ratios) <= 0.9 * min(ratios)
    return flat or reversed_


def _hand_written(blame, kernel: str, verdicts, meant, warn: float) -> Finding:
    """Info: a hand-written adjoint that disagrees with its function where that may be meant (see maybe_meant)."""
    worst = max(meant, key=lambda v: v.rel_error)
    functions = ", ".join(f"@wp.func {name}" for name in worst.custom_adjoint)
    why = (
        "the program does not train through it (a test of the custom-gradient mechanism, a Jacobian probe)"
        if worst.trained is False
        else "its shape is a surrogate's (a straight-through estimator, a reversed gradient)"
    )
    return Finding(
        check=NAME,
        severity=Severity.INFO,
        subject=launch_label(worst),
        message=f"{launch_label(worst)} runs the hand-written adjoint of {functions}, which disagrees with central "
        f"differences of the launch (adjoint {worst.ad:.6g} vs FD {worst.fd:.6g}, rel {worst.rel_error:.3g}); no "
        f"verdict: a custom gradient may differ from the derivative on purpose, and {why}",
        hint=f"nothing to fix if the custom gradient of {functions} is meant to differ; else make it the derivative "
        "of its function",
        evidence=_evidence(blame, verdicts, meant, warn),
    )


def live_suspects(trace: Trace, verdict: LaunchVerdict) -> list[tuple]:
    """The verdict's suspects that apply to the running Warp: (bug, where, construct, rewrite)."""
    found = []
    for bug_name, where, construct, *rest in verdict.suspects:
        bug = getattr(known_bugs, bug_name, None)
        if bug is not None and bug.affects(trace.warp_version):
            found.append((bug, where, construct, rest[0] if rest else ""))
    return found


def _suspected(trace: Trace, blame, kernel: str, verdicts, unsettled, warn: float) -> Finding:
    """A launch the test could not settle (its own finite differences scatter: hard edges, contacts) whose kernel
    holds a construct Warp differentiates wrongly: named as a suspect, info, since nothing measured it wrong."""
    first = unsettled[0]
    bug, where, construct, rewrite = live_suspects(trace, first)[0]
    return Finding(
        check=NAME,
        severity=Severity.INFO,
        subject=launch_label(first),
        message=f"{launch_label(first)} could not be judged alone (its finite differences did not settle), and "
        f"{kernel} holds a construct Warp differentiates wrongly: {short_site(where) or kernel}: {construct} "
        f"({bug.issue}); a suspect, not a measured error",
        hint=f"at {short_site(where) or kernel}: {rewrite}" if rewrite else fix_for(first),
        evidence=_evidence(blame, verdicts, unsettled, warn),
    )


def _surrogate(blame, verdict: LaunchVerdict, warn: float) -> Finding:
    """Info: a custom torch.autograd.Function disagrees with its own forward where that may be meant: its backward
    runs no Warp, or the disagreement is shaped as a surrogate gradient's (a straight-through estimator, gradient
    reversal)."""
    return Finding(
        check=NAME,
        severity=Severity.INFO,
        subject=launch_label(verdict),
        message=f"the backward of {launch_label(verdict)} disagrees with central differences of its forward "
        f"(<J^T w, u> {verdict.ad:.6g} vs FD {verdict.fd:.6g}, rel {verdict.rel_error:.3g}): {verdict.note}; a "
        "possible surrogate gradient (a straight-through estimator, gradient reversal), wrong on purpose; no verdict",
        hint=f"nothing to fix if {verdict.kernel} is meant to pass another gradient than its forward's derivative; "
        "else fix its backward",
        evidence=_evidence(blame, [verdict], [verdict], warn),
    )


def fix_for(verdict: LaunchVerdict) -> str:
    """What to change for a wrong launch or tape entry."""
    if verdict.kernel.startswith("torch.autograd.Function"):
        return (
            f"fix the backward of {verdict.kernel}: it must return the gradient of its forward (check it with "
            "torch.autograd.gradcheck on float64 inputs, or against torch's own gradient of the same formula)"
        )
    if verdict.kernel.startswith("record_func"):
        return (
            f"make the backward recorded at {short_site(verdict.where) or 'its record_func call'} add to the gradients "
            "it is given (x_grad[i] += ..., not x_grad[i] = ...)"
        )
    if verdict.status == "assigns":
        return f"make the adjoint of {verdict.kernel} add to the gradients it is given (+=, not =)"
    if verdict.note and "in place" in verdict.note:
        return f"write the result of {verdict.kernel} to a separate output array and read that downstream"
    return (
        f"check the adjoint of {verdict.kernel} (its @wp.func_grad functions, and loops whose trip count is known "
        "only at run time)"
    )


def launch_label(verdict: LaunchVerdict) -> str:
    """``launch #12 kernel (file.py:34)``; a tape entry that is no launch: ``tape entry #3 wp.copy (recorded on
    the tape)``, ``tape entry #0 record_func Op.backward (train.py:88)`` (where it was recorded)."""
    where = f" ({short_site(verdict.where)})" if verdict.where else ""
    if verdict.kernel.startswith(("wp.copy", "record_func")):
        return f"tape entry #{verdict.index} {verdict.kernel}{where}"
    if verdict.kernel.startswith("torch.autograd.Function"):  # tested once, on its first call's inputs
        return f"{verdict.kernel}{where}"
    return f"launch #{verdict.index} {verdict.kernel}{where}"


@dataclass(frozen=True, eq=False)
class AdjointMismatchEvidence(Record):
    """The per-launch adjoint test's launches behind this finding (worst first, ten at most; ranked by the worst
    relative error), how many launches the kernel made, every status's count, what was not checked and why."""

    launches: tuple[dict, ...]
    kernel_launches: int
    all_launches: dict
    not_checked: object
    why: str
    note: str | None
    seconds: float

    @property
    def rank(self) -> Measure | None:
        return Measure.of(largest(self.launches, "rel_error"), "rel {:.3g}")

    @property
    def marks(self) -> tuple[Mark, ...]:
        wrong = [v for v in self.launches if v.get("status") in ("mismatch", "assigns")]
        return tuple(BlamedLaunch(v.get("kernel"), v.get("index"), v.get("where")) for v in wrong)


def _evidence(blame, verdicts, shown, warn) -> AdjointMismatchEvidence:
    statuses: dict[str, int] = {}
    for v in blame.verdicts:
        statuses[v.status] = statuses.get(v.status, 0) + 1
    return AdjointMismatchEvidence(**{
        "launches": [
            {
                "index": v.index,
                "kernel": v.kernel,
                "where": v.where,
                "status": v.status,
                "rel_error": v.rel_error,
                "adjoint": v.ad,
                "fd": v.fd,
                "note": v.note,
                "custom_adjoint": list(v.custom_adjoint),
                "trained": v.trained,
                "suspects": [
                    {"bug": b, "where": w, "what": t, "rewrite": rest[0] if rest else ""}
                    for b, w, t, *rest in v.suspects
                ],
            }
            for v in sorted(shown, key=lambda v: -v.rel_error)[:10]
        ],
        "kernel_launches": len(verdicts),
        "all_launches": statuses,
        "not_checked": not_checked_reasons(blame.verdicts),
        "why": blame.why,
        "note": blame.note,
        "seconds": blame.seconds,
    })  # fmt: skip
