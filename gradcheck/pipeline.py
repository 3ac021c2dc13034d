"""The whole pipeline for a list of specs: resolve → load → run passes → checks → Report.

Failures of one scenario become a ScenarioResult with status "error"; the others still run.
"""

from __future__ import annotations

import time
import traceback as tb
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from gradcheck.check_options import CheckOptions
from gradcheck.checks import run_checks
from gradcheck.errors import GradcheckError, ScenarioError, UsageError
from gradcheck.exit_codes import ExitCode
from gradcheck.findings import Finding, Severity
from gradcheck.finite_diff import FDOptions
from gradcheck.report import ParamSummary, Report, ScenarioResult
from gradcheck.runner import Progress
from gradcheck.trace import Trace


@dataclass(frozen=True)
class RunOptions:
    device: str | None = None  # None: cuda:0 when available, else cpu
    passes: int = 5
    fault: str | None = None
    settings: Mapping[str, str] = field(default_factory=dict)  # --set key=value, strings
    fail_on: Severity = Severity.ERROR
    debug: bool = False
    clip_norm: float | None = None  # --clip-norm: clip params' gradients after readout, report before/after
    trace_nonfinite: bool = False  # --trace-nonfinite: re-run with wp.config.verify_fp when NaN/Inf is found
    fd: FDOptions = field(default_factory=FDOptions)  # finite-difference check (--fd fast|elements|off)
    replay: bool = True  # write-after-read and reentrancy probe (--no-replay to skip)
    checks: CheckOptions = field(default_factory=CheckOptions)
    timeout: float | None = None  # --timeout: run in a worker process, stop a scenario after this many seconds


def run(
    specs: Sequence[str],
    options: RunOptions,
    progress: Progress | None = None,
    on_scenario: Callable[[str, int, int], None] | None = None,
) -> Report:
    """``progress(name, pass, passes)`` after each pass; ``on_scenario(name, done, total)`` after each scenario."""
    from gradcheck import environment

    if options.passes < 1:
        raise UsageError(f"--passes must be at least 1, got {options.passes}")
    if options.clip_norm is not None and not options.clip_norm > 0:
        raise UsageError(f"--clip-norm must be a positive number, got {options.clip_norm}")
    if not options.checks.max_norm > 0:
        raise UsageError(f"--max-norm must be a positive number, got {options.checks.max_norm}")
    if not 0 < options.fd.warn <= options.fd.error:
        raise UsageError(f"--fd-warn ({options.fd.warn}) must be positive and at most --fd-error ({options.fd.error})")
    if options.timeout is not None and not options.timeout > 0:
        raise UsageError(f"--timeout must be a positive number of seconds, got {options.timeout}")
    device = environment.check_device(options.device) if options.device else environment.default_device()
    results = []
    with _executor(options) as executor:
        for spec in specs:
            results.append(executor.run_one(spec, options, device, progress))
            if on_scenario is not None:
                on_scenario(results[-1].name, len(results), len(specs))
    env = environment.describe(device) | executor.versions  # after the runs: the scenarios imported newton
    return Report(environment=env, scenarios=tuple(results), fail_on=options.fail_on)


def run_one(spec, options: RunOptions, device: str, progress: Progress | None = None) -> ScenarioResult:
    """``spec``: a spec string, or a scenario object (instance, class or factory) for the Python API."""
    from gradcheck import loader
    from gradcheck.resolve import resolve
    from gradcheck.runner import run_passes

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
            scenario = loader.instantiate(spec, where=str(name))
            name = str(getattr(scenario, "name", None) or name)
            spec = name
        loader.check_fault(scenario, name, options.fault)
        loader.check_options(scenario, name, dict(options.settings))
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
        )
    except GradcheckError as exc:
        return _failed(spec, name, options, device, exc, started)
    except Exception as exc:  # a bug in gradcheck or an unexpected Warp failure: still one line
        wrapped = ScenarioError(f"{name}: unexpected {type(exc).__name__}: {exc} (--debug shows the traceback)")
        wrapped.__cause__ = exc
        return _failed(spec, name, options, device, wrapped, started)
    findings = run_checks(trace, options.checks)
    if options.trace_nonfinite and any(f.check == "nonfinite" for f in findings):
        findings = _with_fp_trace(findings, spec, options, device)
    return ScenarioResult(
        spec=spec,
        name=name,
        fault=options.fault,
        device=device,
        options=dict(options.settings),
        passes=len(trace.passes),
        params=_param_summaries(trace, findings),
        findings=findings,
        seconds=time.perf_counter() - started,
        losses=tuple(p.loss for p in trace.passes),
        notes=_notes(trace),
        clip=_clip_summary(trace),
        fd=_fd_summary(trace),
    )


class _InProcess:
    """The default executor: scenarios run in this process (fastest; tracebacks and debuggers work)."""

    versions: Mapping[str, str] = {}  # the report's environment already has this process's versions
    run_one = staticmethod(run_one)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def _executor(options: RunOptions) -> _InProcess:  # or an Isolated, which has the same three members
    if options.timeout is None:
        return _InProcess()
    from gradcheck.isolation import Isolated

    return Isolated(options.timeout)


def _fd_summary(trace: Trace) -> dict | None:
    fd = trace.fd
    if fd is None:
        return None
    return {
        "mode": fd.mode,
        "max_direction_error": fd.max_direction_error if fd.directions else None,
        "max_element_error": max((p.rel_error for p in fd.elements), default=None),
        "rollouts": fd.rollouts,
        "skipped": fd.skipped,
    }


def _with_fp_trace(findings, spec: str, options: RunOptions, device: str):
    """Attach the first operation verify_fp saw producing NaN/Inf to each nonfinite finding."""
    from dataclasses import replace

    from gradcheck.fp_trace import trace_nonfinite

    ops = trace_nonfinite(spec, options.fault, dict(options.settings), device)
    first = ops[0] if ops else "verify_fp printed no offending operation"
    out = []
    for f in findings:
        if f.check == "nonfinite":
            evidence = dict(f.evidence) | {"verify_fp_first": first, "verify_fp_ops": ops[:10]}
            f = replace(f, message=f"{f.message}; first offending operation (verify_fp): {first}", evidence=evidence)
        out.append(f)
    return tuple(out)


def _clip_summary(trace: Trace) -> dict | None:
    if trace.clip_norm is None:
        return None
    totals = [r.clip_total for r in trace.passes if r.clip_total is not None]
    return {
        "max_norm": trace.clip_norm,
        "total_before": [t[0] for t in totals],
        "total_after": [t[1] for t in totals],
    }


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
    return ScenarioResult(
        spec=spec,
        name=name,
        fault=options.fault,
        device=device,
        options=dict(options.settings),
        error=str(exc),
        error_code=ExitCode(exc.exit_code),
        traceback="".join(tb.format_exception(type(cause), cause, cause.__traceback__)) if options.debug else None,
        seconds=seconds,
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
