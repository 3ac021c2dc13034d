"""One scenario, start to finish: resolve → load → run passes → checks → ScenarioResult.

Whatever goes wrong becomes a ScenarioResult with status "error" (a value, not an exception), so the
caller, in this process or in a worker (``isolation``), always gets something to report.
"""

from __future__ import annotations

import time
import traceback as tb
from dataclasses import replace

from gradcheck.checks import run_checks
from gradcheck.engine.interrupts import Interrupted, ending
from gradcheck.engine.runner import Progress
from gradcheck.model.errors import GradcheckError, ScenarioError
from gradcheck.model.exit_codes import ExitCode
from gradcheck.model.findings import Finding
from gradcheck.model.options import RunOptions
from gradcheck.model.report import BlameSummary, ClipSummary, FDSummary, KernelBlame, ParamSummary, ScenarioResult
from gradcheck.model.trace import Trace


def run_one(spec, options: RunOptions, device: str, progress: Progress | None = None) -> ScenarioResult:
    """``spec``: a spec string, or a scenario object (instance, class or factory) for the Python API."""
    from gradcheck.engine.runner import PassFailed, run_passes
    from gradcheck.scenario import contract, loader
    from gradcheck.scenario.resolve import resolve

    started = time.perf_counter()
    name = (
        spec if isinstance(spec, str) else getattr(spec, "name", None) or getattr(spec, "__name__", type(spec).__name__)
    )
    try:
        if isinstance(spec, str):
            ref = resolve(spec)
            name = ref.label
            scenario = loader.load(ref)
            name = loader.scenario_name(scenario, ref)
        else:
            scenario = contract.instantiate(spec, where=str(name))
            name = str(getattr(scenario, "name", None) or name)
            spec = name
        contract.check_fault(scenario, name, options.fault)
        contract.check_options(scenario, name, dict(options.settings))
        trace = run_passes(
            scenario,
            name=name,
            device=device,
            passes=options.passes,
            fault=options.fault,
            options=options.settings,
            progress=progress,
            clip_norm=options.clip_norm,
            fd=options.fd,
            replay=options.replay,
            blame=options.blame,
        )
    except PassFailed as exc:  # a later pass failed: the passes that finished are checked and reported too
        failed = _failed(spec, name, options, device, exc, started)
        return replace(_checked(spec, name, options, device, exc.trace, started), **_error_fields(failed))
    except GradcheckError as exc:
        return _failed(spec, name, options, device, exc, started)
    except Interrupted:
        raise
    except Exception as exc:  # a bug in gradcheck or an unexpected Warp failure: still one line
        wrapped = ScenarioError(f"{name}: unexpected {type(exc).__name__}: {exc} (--debug shows the traceback)")
        wrapped.__cause__ = exc
        return _failed(spec, name, options, device, wrapped, started)
    except (SystemExit, KeyboardInterrupt) as exc:  # raised by the scenario outside its hooks (e.g. on import)
        wrapped = ScenarioError(
            f"{name}: the scenario raised {ending(exc)}; a scenario must not end the process: fix the scenario"
        )
        wrapped.__cause__ = exc
        return _failed(spec, name, options, device, wrapped, started)
    return _checked(spec, name, options, device, trace, started)


def _error_fields(failed: ScenarioResult) -> dict:
    return {"error": failed.error, "error_code": failed.error_code, "traceback": failed.traceback}


def _checked(spec, name, options: RunOptions, device, trace: Trace, started: float) -> ScenarioResult:
    """Checks on the trace, and the result that reports them."""
    findings = run_checks(trace, options.checks)
    if options.trace_nonfinite and any(f.check == "nonfinite" for f in findings):
        findings = _with_fp_trace(findings, spec, options, device)
    return _result(
        spec,
        name,
        options,
        device,
        passes=len(trace.passes),
        params=_param_summaries(trace, findings),
        findings=findings,
        seconds=time.perf_counter() - started,
        losses=tuple(p.loss for p in trace.passes),
        notes=_notes(trace),
        clip=_clip_summary(trace),
        fd=_fd_summary(trace),
        blame=_blame_summary(trace),
    )


def _blame_summary(trace: Trace) -> BlameSummary | None:
    blame = trace.launch_checks
    if blame is None:
        return None
    rows: dict[str, list] = {}
    for verdict in blame.verdicts:
        rows.setdefault(verdict.kernel, []).append(verdict)
    kernels = []
    for kernel, verdicts in rows.items():
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
            )
        )
    kernels.sort(key=lambda k: (-(k.statuses.get("mismatch", 0) + k.statuses.get("assigns", 0)), -k.worst_rel_error))
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


def _with_fp_trace(findings, spec, options: RunOptions, device: str):
    """Attach the first operation verify_fp saw producing NaN/Inf to each nonfinite finding."""
    from dataclasses import replace

    from gradcheck.engine.fp_trace import trace_nonfinite

    ops = trace_nonfinite(spec, options.fault, dict(options.settings), device)
    first = ops[0] if ops else "verify_fp printed no offending operation"
    out = []
    for f in findings:
        if f.check == "nonfinite":
            evidence = dict(f.evidence) | {"verify_fp_first": first, "verify_fp_ops": ops[:10]}
            f = replace(f, message=f"{f.message}; first offending operation (verify_fp): {first}", evidence=evidence)
        out.append(f)
    return tuple(out)


def _clip_summary(trace: Trace) -> ClipSummary | None:
    if trace.clip_norm is None:
        return None
    totals = [r.clip_total for r in trace.passes if r.clip_total is not None]
    return ClipSummary(
        max_norm=trace.clip_norm,
        total_before=tuple(t[0] for t in totals),
        total_after=tuple(t[1] for t in totals),
    )


def _notes(trace: Trace) -> tuple[str, ...]:
    skipped: dict[str, list[int]] = {}
    for record in trace.passes:
        if record.backward_skipped:
            skipped.setdefault(record.backward_skipped, []).append(record.index)
    return tuple(
        f"backward not launched on pass(es) {', '.join(map(str, passes))}: {reason}"
        for reason, passes in skipped.items()
    )


def _failed(spec, name, options: RunOptions, device, exc: GradcheckError, started) -> ScenarioResult:
    return failed_result(spec, name, options, device, exc, time.perf_counter() - started)


def failed_result(spec, name, options: RunOptions, device, exc: GradcheckError, seconds: float) -> ScenarioResult:
    """A scenario that could not run, as a value: its error line, exit code and (with --debug) traceback."""
    cause = exc.__cause__ or exc
    return _result(
        spec,
        name,
        options,
        device,
        error=str(exc),
        error_code=ExitCode(exc.exit_code),
        traceback="".join(tb.format_exception(type(cause), cause, cause.__traceback__)) if options.debug else None,
        seconds=seconds,
    )


def _result(spec, name, options: RunOptions, device, **fields) -> ScenarioResult:
    """What every result says, run or failed: which scenario, where, with which fault and settings."""
    return ScenarioResult(
        spec=spec, name=name, fault=options.fault, device=device, options=dict(options.settings), **fields
    )


def _param_summaries(trace: Trace, findings: tuple[Finding, ...]) -> tuple[ParamSummary, ...]:
    flagged: dict[str, list[str]] = {}
    for f in findings:
        for subject in _subjects(f):
            flagged.setdefault(subject, [])
            if f.check not in flagged[subject]:
                flagged[subject].append(f.check)
    no_backward = bool(trace.passes) and all(r.backward_skipped for r in trace.passes)
    return tuple(
        ParamSummary(
            name=p.name,
            subject=p.subject,
            shape=p.shape,
            dtype=p.dtype,
            norms=p.norms,
            clipped_norms=tuple(q.clipped_norm for q in p.passes) if trace.clip_norm is not None else (),
            verdict=", ".join(flagged.get(p.subject, [])) or ("backward not run" if no_backward else "ok"),
        )
        for p in trace.params
    )


def _subjects(finding: Finding) -> list[str]:
    """Params a finding covers: its subject plus any it lists in evidence."""
    return [finding.subject, *(finding.evidence.get("affected") or [])]
