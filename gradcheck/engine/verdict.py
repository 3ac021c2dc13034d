"""Trace → findings → ScenarioResult: the one place a driver's evidence becomes a result.

``gradcheck run`` (engine.scenario_run), ``gradcheck exec`` (engine.program_audit) and ``gradcheck.audit()`` all
end here, so the same evidence gives the same findings and the same report rows whoever drove the program.
"""

from __future__ import annotations

from gradcheck.checks import run_checks
from gradcheck.model.findings import Finding, checks_by_subject
from gradcheck.model.options import DEFAULT_CHECKS, CheckOptions
from gradcheck.model.report import BlameSummary, ClipSummary, FDSummary, KernelBlame, ParamSummary, ScenarioResult
from gradcheck.model.trace import DEFAULT_ADJOINT_TEST, Trace, not_checked_reasons


def judge(trace: Trace, checks: CheckOptions = DEFAULT_CHECKS) -> tuple[Finding, ...]:
    """The checks on ``trace``. A warning their arithmetic raises (NumPy on a NaN norm) is gradcheck's, not the
    program's: never shown on the stderr the program's output went to, never an error under ``-W error``."""
    from gradcheck.warp_compat.runtime import own_warnings_ignored

    with own_warnings_ignored():
        return run_checks(trace, checks)


def result(trace: Trace, findings: tuple[Finding, ...], **fields) -> ScenarioResult:
    """The ScenarioResult of a judged trace; ``fields``: spec, name, fault, device, options, seconds, notes…"""
    notes = tuple(fields.pop("notes", ())) + notes_of(trace)
    return ScenarioResult(
        passes=fields.pop("passes", trace.iterations or len(trace.passes)),
        params=param_summaries(trace, findings),
        findings=findings,
        losses=fields.pop("losses", tuple(p.loss for p in trace.passes)),
        notes=notes,
        clip=_clip_summary(trace),
        fd=_fd_summary(trace),
        blame=_blame_summary(trace),
        unit=trace.unit,
        sampling=trace.sampling,
        loss_curve=fields.pop("loss_curve", loss_curve(trace)),
        **fields,
    )


def loss_curve(trace: Trace) -> tuple[tuple[int, float | None], ...]:
    """The loss over the run, as the trace kept it: each kept iteration's, and each backward a gradient's bounded
    history sampled (a long program keeps both bounded, so this is too), in backward order."""
    points = {r.index: r.loss for r in trace.passes}
    for param in trace.params:
        for sample in param.history:
            points.setdefault(sample.backward, sample.loss)
    return tuple(sorted(points.items()))


def merged(torch_result: ScenarioResult, warp_result: ScenarioResult) -> ScenarioResult:
    """One result for a program that runs PyTorch's autograd with Warp inside: torch's backwards are the
    iterations (their count, their losses), the parameters of both sides in one table (torch's first), every
    finding of both, errors first."""
    from dataclasses import replace

    return replace(
        warp_result,
        passes=torch_result.passes or warp_result.passes,
        params=torch_result.params + warp_result.params,
        findings=tuple(sorted(torch_result.findings + warp_result.findings, key=lambda f: -f.severity)),
        losses=torch_result.losses or warp_result.losses,
        loss_curve=torch_result.loss_curve or warp_result.loss_curve,
        notes=warp_result.notes + torch_result.notes,
        sampling=torch_result.sampling or warp_result.sampling,
        blame=_both(warp_result.blame, torch_result.blame),
    )


def _both(warp: BlameSummary | None, torch: BlameSummary | None) -> BlameSummary | None:
    """The Warp side's adjoint tests and the torch side's (custom autograd.Functions) as one summary."""
    if warp is None or torch is None:
        return warp or torch
    note = "; ".join(n for n in (warp.note, torch.note) if n) or None
    return BlameSummary(
        f"{warp.why}; {torch.why}", warp.skipped and torch.skipped, note, warp.seconds + torch.seconds,
        warp.kernels + torch.kernels,
    )  # fmt: skip


def _blame_summary(trace: Trace) -> BlameSummary | None:
    blame = trace.launch_checks
    if blame is None:
        return None
    rows: dict[tuple, list] = {}
    for verdict in blame.verdicts:
        # a kernel name is not a kernel: factories (warp-nn's layers) make many under one name, told apart by where
        # they are launched; the default test's verdicts (one a kernel) by that too
        where = verdict.where if DEFAULT_ADJOINT_TEST in blame.why else None
        rows.setdefault((verdict.kernel, where), []).append(verdict)
    kernels = []
    for (kernel, _where), verdicts in rows.items():
        statuses: dict[str, int] = {}
        for v in verdicts:
            statuses[v.status] = statuses.get(v.status, 0) + 1
        judged = [v for v in verdicts if v.status in ("ok", "mismatch", "assigns")]
        worst = max(judged, key=lambda v: v.rel_error, default=None)
        kernels.append(
            KernelBlame(
                kernel,
                verdicts[0].where,
                len(verdicts),
                statuses,
                worst.rel_error if worst else 0.0,
                worst.index if worst else None,
                not_checked_reasons(verdicts),
            )
        )
    kernels.sort(
        key=lambda k: (
            -(k.statuses.get("mismatch", 0) + k.statuses.get("assigns", 0) + k.statuses.get("no-backward", 0)),
            -k.worst_rel_error,
        )
    )
    return BlameSummary(blame.why, blame.skipped, blame.note, blame.seconds, tuple(kernels))


def _fd_summary(trace: Trace) -> FDSummary | None:
    fd = trace.fd
    if fd is None:
        return None
    return FDSummary(
        mode=fd.mode,
        max_direction_error=fd.max_direction_error if fd.directions else None,
        max_element_error=max((p.rel_error for p in fd.elements), default=None),
        rollouts=fd.rollouts,
        skipped=fd.skipped,
        noise_floor=fd.noise_floor,
        noise_level=fd.noise_level,
        converged=fd.converged,
        restored_arrays=fd.restored_arrays,
        state_note=fd.state_note,
    )


def _clip_summary(trace: Trace) -> ClipSummary | None:
    if trace.clip_norm is None:
        return None
    totals = [r.clip_total for r in trace.passes if r.clip_total is not None]
    return ClipSummary(
        max_norm=trace.clip_norm,
        total_before=tuple(t[0] for t in totals),
        total_after=tuple(t[1] for t in totals),
    )


def notes_of(trace: Trace) -> tuple[str, ...]:
    """One note per reason a backward was not launched (a dangling adjoint pointer), naming where: the passes
    under ``run``; the program's backwards under ``exec`` and ``audit()``, which skip them when told to keep going
    (``exec`` without it stops the program, and its note on the stop replaces this one)."""
    skipped: dict[str, list[int]] = {}
    for record in trace.passes:
        if record.backward_skipped:
            skipped.setdefault(record.backward_skipped, []).append(record.index)
    if trace.unit == "pass":
        return tuple(
            f"backward not launched on pass(es) {', '.join(map(str, passes))}: {reason}"
            for reason, passes in skipped.items()
        )
    return tuple(
        f"backward{'s' if len(indices) > 1 else ''} {_which(indices)} "
        f"{'were' if len(indices) > 1 else 'was'} not launched: {reason}"
        for reason, indices in skipped.items()
    )


def _which(indices: list[int], shown: int = 8) -> str:
    """``#3``, ``#1–#5`` (a run), or ``#1, #4, #9 and 12 more``: a long program's list stays one line."""
    if len(indices) > 2 and indices == list(range(indices[0], indices[-1] + 1)):
        return f"#{indices[0]}–#{indices[-1]}"
    listed = ", ".join(f"#{i}" for i in indices[:shown])
    return listed + (f" and {len(indices) - shown} more" if len(indices) > shown else "")


def param_summaries(trace: Trace, findings: tuple[Finding, ...]) -> tuple[ParamSummary, ...]:
    flagged = checks_by_subject(findings)
    no_backward = bool(trace.passes) and all(r.backward_skipped for r in trace.passes)
    any_param = any(p.is_param for p in trace.params)
    # leaves are shown when they are all there is (a program that updates nothing gradcheck saw) or when a finding
    # judged them as leaves (a param's subject may also name a leaf a later pass read in its place)
    judged = {s for f in findings if f.evidence.get("role") == "leaf" for s in f.subjects}
    shown = [p for p in trace.params if p.is_param or not any_param]
    # one row per judged leaf subject, the latest (a fresh ``batch`` every step is many leaves of one name)
    latest = {p.subject: p for p in trace.params if not p.is_param and any_param and p.subject in judged}
    shown += list(latest.values())
    return tuple(
        ParamSummary(
            name=p.name,
            subject=p.subject,
            shape=p.shape,
            dtype=p.dtype,
            # the bounded history (every pass or backward until it thins out), not just the kept records
            norms=tuple(s.norm for s in p.history) or p.norms,
            backwards=tuple(s.backward for s in p.history),
            clipped_norms=tuple(q.clipped_norm for q in p.passes) if trace.clip_norm is not None else (),
            verdict=", ".join(flagged.get(p.subject, [])) or ("backward not run" if no_backward else "ok"),
            role=p.role,
        )
        for p in shown
    )
