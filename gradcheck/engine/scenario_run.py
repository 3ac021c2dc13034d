"""One scenario, start to finish: resolve → load → run passes → checks → ScenarioResult.

Whatever goes wrong becomes a ScenarioResult with status "error" (a value, not an exception), so the
caller, in this process or in a worker (``isolation``), always gets something to report.
"""

from __future__ import annotations

import time
import traceback as tb
from collections.abc import Iterable, Mapping
from dataclasses import replace

from gradcheck.engine import verdict
from gradcheck.engine.interrupts import Interrupted, ending
from gradcheck.engine.runner import Progress
from gradcheck.model.errors import GradcheckError, ScenarioError, UsageError
from gradcheck.model.exit_codes import ExitCode
from gradcheck.model.options import RunOptions
from gradcheck.model.report import ScenarioResult
from gradcheck.model.trace import Trace


def prepare(spec, fault: str | None, settings: Mapping[str, str]):
    """(scenario instance, name) of a spec string (``loader.checked``, the one resolver) or of a scenario object
    (instance, class or factory, for the Python API), its fault and --set keys checked."""
    from gradcheck.scenario import contract, loader

    if isinstance(spec, str):
        return loader.checked(spec, fault, settings)
    scenario = contract.instantiate(spec, where=_label(spec))
    name = str(getattr(scenario, "name", None) or _label(spec))
    contract.check_fault(scenario, name, fault)
    contract.check_options(scenario, name, dict(settings))
    return scenario, name


def preflight(requests: Iterable[tuple[object, str | None, Mapping[str, str], str | None]]) -> None:
    """Every (spec, fault, settings, where) resolved, loaded and checked before any scenario's setup() runs: the
    first usage error is raised, prefixed by its ``where`` (ci: the config entry). A scenario that cannot be loaded
    is not a usage error: it is left to run_one, which reports it beside the others."""
    for spec, fault, settings, where in requests:
        try:
            prepare(spec, fault, settings)
        except UsageError as exc:
            raise UsageError(f"{where}: {exc}" if where else str(exc)) from None
        except Interrupted:
            raise
        except (Exception, SystemExit, KeyboardInterrupt):  # noqa: BLE001 - run_one reports it as the scenario's
            continue


def _label(spec) -> str:
    """What to call a scenario before it is loaded."""
    from gradcheck.scenario import loader

    if isinstance(spec, str):
        return loader.label(spec)
    return str(getattr(spec, "name", None) or getattr(spec, "__name__", None) or type(spec).__name__)


def run_one(spec, options: RunOptions, device: str, progress: Progress | None = None) -> ScenarioResult:
    """``spec``: a spec string, or a scenario object (instance, class or factory) for the Python API."""
    from gradcheck.engine.runner import PassFailed, run_passes

    started = time.perf_counter()
    name = _label(spec)
    try:
        scenario, name = prepare(spec, options.fault, options.settings)
        if not isinstance(spec, str):
            spec = name
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
            checks=options.checks,
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
    findings = verdict.judge(trace, options.checks)
    if options.trace_nonfinite and any(f.check == "nonfinite" for f in findings):
        findings = _with_fp_trace(findings, spec, options, device)
    return verdict.result(
        trace,
        findings,
        spec=spec,
        name=name,
        fault=options.fault,
        device=device,
        options=dict(options.settings),
        seconds=time.perf_counter() - started,
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
            evidence = f.evidence.extended(verify_fp_first=first, verify_fp_ops=ops[:10])
            f = replace(f, message=f"{f.message}; first offending operation (verify_fp): {first}", evidence=evidence)
        out.append(f)
    return tuple(out)


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
