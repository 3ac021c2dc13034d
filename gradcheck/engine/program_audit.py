"""``gradcheck exec`` and ``gradcheck.audit()``: a program nobody rewrote, watched by the one observer.

The program runs in this process, as ``python script.py ARGS`` or ``python -m module ARGS`` would run it
(runpy, ``sys.argv``, ``sys.path[0]``), its output untouched, with gradcheck.observe's Observer installed: the same
observer, the same checks and the same severities as ``gradcheck run``; an iteration is one backward. The result
is one ScenarioResult: ``name`` the script or module, ``passes`` the backwards seen. A program that fails (an
exception, a nonzero exit status) is exit 3 with its status and last error line, its audit still reported;
Ctrl-C reports what ran. ``ProgramAudit`` is the same for code in this process (a notebook, a test suite).
"""

from __future__ import annotations

import os
import runpy
import sys
import time
import traceback
from dataclasses import dataclass

from gradcheck.engine import verdict
from gradcheck.model.exit_codes import ExitCode
from gradcheck.model.options import DEFAULT_CHECKS, CheckOptions
from gradcheck.model.report import ScenarioResult
from gradcheck.observe.program_roots import program_object, stack_roots


@dataclass(frozen=True)
class ProgramRun:
    target: str
    module: bool
    status: int | str | None  # the program's exit status (None or 0: it finished)
    error: str | None  # its last error line
    traceback: str | None
    seconds: float
    interrupted: object = None  # an Interrupted when Ctrl-C or SIGTERM stopped it
    stopped: bool = False  # gradcheck stopped it before a backward through a dangling pointer


def run_program(target: str, args: list[str], module: bool = False) -> ProgramRun:
    """Run ``target`` (a script path, or a module name with ``module``) as ``__main__`` with ``args``."""
    from gradcheck.engine.interrupts import Interrupted, watch
    from gradcheck.observe import DanglingAdjointStop

    saved_argv, saved_path, saved_stderr = sys.argv[:], sys.path[:], sys.stderr
    sys.stderr = tail = _LastLine(sys.stderr)
    started = time.perf_counter()
    status = error = trace = interrupted = None
    stopped = False
    try:
        with watch():
            sys.argv = [target, *args]
            if module:
                runpy.run_module(target, run_name="__main__", alter_sys=True)
            else:
                sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
                runpy.run_path(target, run_name="__main__")
    except Interrupted as exc:
        interrupted = exc
    except DanglingAdjointStop as exc:
        status, error, stopped = 1, str(exc), True
    except SystemExit as exc:
        status = exc.code
        if status not in (None, 0):  # sys.exit("message"), or the last line it wrote (argparse's usage error)
            error = str(status) if not isinstance(status, int) else tail.last
    except BaseException as exc:  # noqa: BLE001 - the program's own failure is reported, not raised
        status = 1
        error = f"{type(exc).__name__}: {exc}"
        trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    finally:
        sys.argv[:], sys.path[:], sys.stderr = saved_argv, saved_path, saved_stderr
    return ProgramRun(target, module, status, error, trace, time.perf_counter() - started, interrupted, stopped)


class _LastLine:
    """sys.stderr, passed through, remembering the last line written: the program's last error line."""

    def __init__(self, stream) -> None:
        self._stream, self.last = stream, None

    def write(self, text: str) -> int:
        lines = [line.strip() for line in str(text).splitlines() if line.strip()]
        if lines:
            self.last = lines[-1][:300]
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def audit_program(
    target: str, args: list[str], module: bool = False, keep_going: bool = False, checks: CheckOptions = DEFAULT_CHECKS
) -> tuple[ScenarioResult, ProgramRun]:
    """Run the program under the observer; (its result, how it ran)."""
    name = f"{target} {args[0]}" if module and args and not args[0].startswith("-") else target
    own = ("__main__", target) if module else ("__main__",)
    audit = ProgramAudit(lambda: stack_roots(own), stop_on_dangling=not keep_going)
    with audit:
        run = run_program(target, args, module)
    notes = []
    if run.stopped:
        notes.append(run.error)
    elif audit.observer.backwards and any(r.backward_skipped for r in audit.trace().passes):
        notes.append("--keep-going: backwards with a dangling adjoint pointer were not launched")
    error = code = None
    if not run.stopped and run.interrupted is None and run.status not in (None, 0):
        status = f"exited with status {run.status}" if isinstance(run.status, int) else "exited"
        error = f"{run.target}: the program {status}" + (f": {run.error}" if run.error else "")
        code = ExitCode.SCENARIO_ERROR
    result = audit.result(
        checks,
        spec=name,
        name=name,
        error=error,
        error_code=code,
        traceback=run.traceback,
        seconds=run.seconds,
        notes=tuple(notes),
    )
    return result, run


class ProgramAudit:
    """The observer around code of this process: ``with ProgramAudit(roots): ...``, then ``result()``.

    ``roots()`` returns {name: object} where the program keeps its state (for names); ``params``: arrays the caller
    declares as parameters ({key: array}), judged as a scenario's params() are."""

    def __init__(self, roots, params: dict | None = None, stop_on_dangling: bool = False):
        self._roots, self._params, self._stop = roots, params, stop_on_dangling
        self.observer = None
        self._ledger = None
        self._trace = None

    def __enter__(self) -> ProgramAudit:
        from gradcheck.observe import Observer
        from gradcheck.probes.allocations import AllocationLedger

        self._ledger = AllocationLedger().install()
        self.observer = Observer(
            roots=lambda: [program_object(group) for group in self._roots()],
            device=None,
            ledger=self._ledger,
            stop_on_dangling=self._stop,
            auto_iterations=True,
            fixed_params=False,
        )
        if self._params:
            self.observer.declare(dict(self._params))
        self._installed = self.observer.installed()
        self._installed.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._installed.__exit__(*exc)
            self.observer.finish()
        finally:
            self._ledger.uninstall()

    def trace(self):
        from gradcheck.model.trace import Trace
        from gradcheck.probes.warp_compat import warp_version

        if self._trace is None:
            self._trace = Trace(
                scenario="program", fault=None, device=", ".join(self.observer.devices) or _device(),
                warp_version=warp_version(),
                **self.observer.trace_fields(),
            )  # fmt: skip
        return self._trace

    def result(self, checks: CheckOptions = DEFAULT_CHECKS, **fields) -> ScenarioResult:
        trace = self.trace()
        notes = list(fields.pop("notes", ()))
        observer = self.observer
        if observer.graph_replays:
            unaudited = observer.graph_replays - observer.audited_replays
            notes.append(
                f"{observer.graph_replays} graph replay(s) (wp.capture_launch): {observer.audited_replays} audited as "
                "a backward of the tape captured in the graph"
                + (f", {unaudited} ran a graph with no backward captured in it (a forward)" if unaudited else "")
            )
        if not observer.backwards:
            notes.append("the program never called tape.backward: nothing to audit")
        notes.extend(observer.notes)
        fields.setdefault("device", trace.device)
        return verdict.result(trace, verdict.judge(trace, checks), notes=tuple(notes), **fields)


def _device() -> str | None:
    try:
        import warp as wp

        return str(wp.get_device())
    except Exception:  # noqa: BLE001 - the report says "?" rather than fail
        return None
