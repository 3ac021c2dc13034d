"""``gradcheck exec`` and ``gradcheck.audit()``: a program nobody rewrote, watched by the one observer.

The program is hosted by engine.hosting exactly as ``python script.py ARGS`` or ``python -m module ARGS`` would run
it, with gradcheck.observe's Observer installed: the same observer, the same checks and the same severities as
``gradcheck run``; an iteration is one backward. The result is one ScenarioResult: ``name`` the script or module,
``passes`` the backwards seen. A program that fails (an exception, a nonzero exit status) is exit 3 with its status
and last error line, its audit still reported; Ctrl-C reports what ran. ``refresh`` gets an interim result at most
once a second while it runs (``--output`` on disk survives ``os._exit`` and SIGKILL). ``ProgramAudit`` is the same
for code in this process (a notebook, a test suite).
"""

from __future__ import annotations

import os
import sys
import threading
import time
import weakref
from dataclasses import replace

from gradcheck.engine.hosting import ProgramRun, after_import, run_program
from gradcheck.model.exit_codes import ExitCode
from gradcheck.model.options import DEFAULT_CHECKS, CheckOptions
from gradcheck.model.report import ScenarioResult

__all__ = ["ProgramAudit", "ProgramRun", "audit_program", "run_program", "stack_roots"]


def stack_roots(own: tuple[str, ...] = ("__main__",)) -> list[dict]:
    """observe.program_roots.stack_roots, imported when asked: the observer's modules (and verdict's, the checks')
    are imported when the program imports Warp or ends, not before its first line (``gradcheck exec``'s start-up)."""
    from gradcheck.observe.program_roots import stack_roots as roots

    return roots(own)


REFRESH_SECONDS = 1.0


def audit_program(
    target: str,
    args: list[str],
    module: bool = False,
    keep_going: bool = False,
    checks: CheckOptions = DEFAULT_CHECKS,
    *,
    refresh=None,
    top_level: bool = False,
    cadence: tuple[int, int] | None = None,
    blame_at: int | None = None,
    adjoint_test: bool = True,
) -> tuple[ScenarioResult, ProgramRun]:
    """Run the program under the observer; (its result, how it ran). The observer starts when the program imports
    Warp (at once if it is imported already): gradcheck imports nothing of Warp's on the program's behalf.
    ``refresh(result)``: called with an interim result after a backward, at most once a second; ``top_level``:
    this process is the program's (see engine.hosting); ``blame_at``: the backward whose launches are tested one by
    one (observe.blame_watch), None for none; ``adjoint_test``: the default test of every kernel's first launch
    (observe.kernel_tests)."""
    name = f"{target} {args[0]}" if module and args and not args[0].startswith("-") else target
    own = ("__main__", target) if module else ("__main__",)
    from gradcheck.model import dataflow

    audit = ProgramAudit(
        lambda: stack_roots(own), stop_on_dangling=not keep_going, cadence=tuple(cadence or ()), blame_at=blame_at,
        keep_dataflow=dataflow.wanted(), checks=checks, adjoint_test=adjoint_test,
    )  # fmt: skip
    refreshing = _every(REFRESH_SECONDS, lambda: refresh(_interim(audit, checks, name))) if refresh else None

    def start() -> None:
        audit.__enter__()
        _CHILDREN_IGNORED.add(audit)
        if refreshing is not None:
            audit.observer.after_backward.append(refreshing)

    def start_torch() -> None:
        audit.start_torch()
        _CHILDREN_IGNORED.add(audit)

    hook = after_import("warp", start)
    torch_hook = after_import("torch", start_torch)
    try:
        run = run_program(target, args, module, top_level=top_level)
    finally:
        hook.remove()
        torch_hook.remove()
        audit.stop_torch()
        if audit.observer is not None and hook.failed is None:
            _CHILDREN_IGNORED.discard(audit)
            if refreshing in audit.observer.after_backward:
                audit.observer.after_backward.remove(refreshing)
            audit.__exit__(None, None, None)
    error = code = None
    if not run.stopped and run.interrupted is None and run.status != 0:
        error = f"{run.target}: the program exited with status {run.status}" + (f": {run.error}" if run.error else "")
        error += _cache_hint()
        code = ExitCode.SCENARIO_ERROR
    fields = dict(spec=name, name=name, error=error, error_code=code, traceback=run.traceback, seconds=run.seconds)
    if audit.observer is None and audit.torch is not None and hook.failed is None:
        dataflow.keep(name, None)
        return audit.result(checks, notes=(run.error,) if run.stopped else (), **fields), run
    if audit.observer is None or hook.failed is not None:
        dataflow.keep(name, None)
        return _unobserved(hook.failed, fields), run
    dataflow.keep(name, audit.trace().dataflow)
    from gradcheck.engine import verdict

    if not run.stopped:  # the backwards --keep-going skipped, if any: verdict.notes_of names them
        return audit.result(checks, **fields), run
    # stopped before a backward: the stop says which one and why, so the skipped-backward note would say it again
    result = audit.result(checks, notes=(run.error,), **fields)
    said = set(verdict.notes_of(audit.trace()))
    return replace(result, notes=tuple(n for n in result.notes if n not in said)), run


def _unobserved(failed: BaseException | None, fields: dict) -> ScenarioResult:
    """The result of a program the observer never watched: it never imported Warp, or the observer failed to start
    (an internal error, said in the report: the program itself ran untouched)."""
    if failed is None:
        return ScenarioResult(notes=("the program never imported Warp: nothing to audit",), unit="backward", **fields)
    from gradcheck.checks.internal_error import finding
    from gradcheck.model.trace import InternalError

    found = finding(InternalError.of("observer: start", failed))
    return ScenarioResult(findings=(found,), unit="backward", **fields)


def _interim(audit: ProgramAudit, checks: CheckOptions, name: str) -> ScenarioResult:
    backwards = audit.observer.backwards
    note = (
        f"interim report, written while the program ran (after backward {backwards}); the final report replaces it "
        "when the program ends, so this one stays only if the process was killed (SIGKILL) or left by os._exit"
    )
    return audit.snapshot(checks, spec=name, name=name, notes=(note,))


def _every(seconds: float, callback):
    """``callback`` throttled to at most once per ``seconds``, counted from now (a program that ends within the
    first second gets only the final report: an interim one cost as much as 300 small backwards), one caller at a
    time."""
    last = [time.monotonic()]
    lock = threading.Lock()

    def throttled() -> None:
        if time.monotonic() - last[0] < seconds or not lock.acquire(blocking=False):
            return
        try:
            last[0] = time.monotonic()
            callback()
        finally:
            lock.release()

    return throttled


# Audits under way in this process. A process the program forks (os.fork, multiprocessing's fork start method)
# inherits the installed observer: in the child it stands aside for good (it is not audited, and a CUDA or report
# call there would be wrong), so only the process that started reports.
_CHILDREN_IGNORED: weakref.WeakSet = weakref.WeakSet()


def _ignore_in_child() -> None:
    for audit in list(_CHILDREN_IGNORED):
        if audit.torch is not None:
            audit.torch._depth += 1  # the torch side stays aside in this child too
        if audit.observer is None:
            continue
        audit._in_child = audit.observer.ignoring()  # kept, so the observer stays aside in this child
        audit._in_child.__enter__()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_ignore_in_child)


class ProgramAudit:
    """The observer around code of this process: ``with ProgramAudit(roots): ...``, then ``result()``.

    ``roots()`` returns {name: object} where the program keeps its state (for names); ``params``: arrays the caller
    declares as parameters ({key: array}), judged as a scenario's params() are; ``keep_dataflow``: keep one
    backward's dataflow picture (``trace().dataflow``, for --graph); ``cadence``: which backwards get the full
    evidence (an observe.cadence Cadence, or its arguments: made when the observer starts, so that constructing
    this imports nothing of the observer's before the program runs)."""

    def __init__(
        self, roots, params: dict | None = None, stop_on_dangling: bool = False, cadence=None, blame_at=None,
        keep_dataflow: bool = False, checks: CheckOptions = DEFAULT_CHECKS, adjoint_test: bool = True,
    ):  # fmt: skip
        self._roots, self._params, self._stop, self._blame_at = roots, params, stop_on_dangling, blame_at
        self._keep_dataflow, self._checks, self._adjoint_test = keep_dataflow, checks, adjoint_test
        self._cadence_given, self._made_cadence = cadence, None
        self.observer = None
        self._ledger = None
        self._trace = None
        self.torch = None  # the torch side (pytorch.watch), once the program imports torch
        self._torch_installed = None
        self._torch_note: str | None = None  # why torch's side was not audited (too old a torch)

    @property
    def _cadence(self):
        if self._made_cadence is None:
            from gradcheck.observe.cadence import Cadence

            given = self._cadence_given
            self._made_cadence = Cadence(*given) if isinstance(given, tuple) else given or Cadence()
        return self._made_cadence

    def start_torch(self) -> None:
        """The program imported torch: audit its backwards and the torch<->Warp bridge too (torch >=
        pytorch.patches.TORCH_MIN; else one note says why not)."""
        import sys

        from gradcheck.pytorch.patches import unusable

        if self.torch is not None or self._torch_note is not None:
            return
        self._torch_note = unusable(sys.modules.get("torch"))
        if self._torch_note is not None:
            return
        from gradcheck.pytorch.watch import TorchWatch

        self.torch = TorchWatch(lambda: self._roots(), cadence=self._cadence, params=_torch_params(self._params))
        self.torch.functions.enabled = self._adjoint_test  # custom autograd.Functions: the same switch
        self._torch_installed = self.torch.installed()
        self._torch_installed.__enter__()
        if self.observer is not None:
            self.torch.join(self.observer)

    def stop_torch(self) -> None:
        if self._torch_installed is None:
            return
        installed, self._torch_installed = self._torch_installed, None
        try:
            installed.__exit__(None, None, None)
        finally:
            self.torch.finish()

    def __enter__(self) -> ProgramAudit:
        from gradcheck.measure.allocations import AllocationLedger
        from gradcheck.observe import Observer
        from gradcheck.observe.config import observer_config
        from gradcheck.observe.program_roots import program_object

        self._ledger = AllocationLedger().install()
        config = observer_config(
            self._checks,
            stop_on_dangling=self._stop,
            auto_iterations=True,  # a program's every backward is an iteration
            fixed_params=False,
            cadence=self._cadence,
            keep_dataflow=self._keep_dataflow,
        )
        self.observer = Observer(
            roots=lambda: [program_object(group) for group in self._roots()],
            ledger=self._ledger,
            config=config,
            blame=self._launch_tests(),
        )
        if self._params:
            torch_params = _torch_params(self._params)
            warp_params = {k: v for k, v in self._params.items() if k not in torch_params}
            if warp_params:
                self.observer.declare(warp_params)
        self._installed = self.observer.installed()
        self._installed.__enter__()
        if self.torch is not None:
            self.torch.join(self.observer)
        elif "torch" in sys.modules:
            self.start_torch()
        return self

    def _launch_tests(self):
        """exec's per-launch tests (``--blame`` and the default adjoint test), or None: exec-only modules."""
        if self._blame_at is None and not self._adjoint_test:
            return None
        from gradcheck.observe.blame_watch import BlameWatch
        from gradcheck.observe.kernel_tests import KernelTests
        from gradcheck.observe.launch_tests import LaunchTests

        blame = BlameWatch(self._blame_at) if self._blame_at is not None else None
        return LaunchTests(blame, KernelTests(self._cadence) if self._adjoint_test else None)

    def __exit__(self, *exc) -> None:
        try:
            self.stop_torch()
            self._installed.__exit__(*exc)
            self.observer.finish()
        finally:
            self._ledger.uninstall()

    def trace(self):
        if self.observer is None:
            return self._torch_trace()
        if self._trace is None:
            self._trace = self._new_trace()
        return self._trace

    def _new_trace(self):
        from gradcheck.model.trace import Trace
        from gradcheck.warp_compat import warp_version

        return Trace(
            scenario="program", fault=None, device=", ".join(self.observer.devices) or _device(),
            warp_version=warp_version(),
            **self.observer.trace_fields(),
        )  # fmt: skip

    def result(self, checks: CheckOptions = DEFAULT_CHECKS, **fields) -> ScenarioResult:
        return self._judged(self.trace(), checks, **fields)

    def snapshot(self, checks: CheckOptions = DEFAULT_CHECKS, **fields) -> ScenarioResult:
        """The result so far, while the code still runs (``gradcheck exec --output`` refreshed on disk): judged
        from a fresh trace of the observer's records, which go on; ``trace()`` and ``result()`` are untouched."""
        return self._judged(self._new_trace() if self.observer is not None else None, checks, **fields)

    def _judged(self, trace, checks: CheckOptions, **fields) -> ScenarioResult:
        from gradcheck.engine import verdict

        notes = list(fields.pop("notes", ()))
        if self._torch_note is not None:
            notes.append(self._torch_note)
        torch_trace = self._torch_trace()
        if self.observer is None:
            if torch_trace is None:
                return ScenarioResult(notes=tuple(notes), unit="backward", **fields)
            notes.extend(self.torch.notes)
            if not self.torch.backwards:
                notes.append("the program never called backward (torch's or a Warp tape's): nothing to audit")
            fields.setdefault("device", torch_trace.device)
            return verdict.result(torch_trace, verdict.judge(torch_trace, checks), notes=tuple(notes), **fields)
        warp_result = self._warp_judged(trace, checks, notes, **fields)
        if torch_trace is None:
            return warp_result
        names = {k: fields[k] for k in ("spec", "name") if k in fields}
        torch_result = verdict.result(
            torch_trace, verdict.judge(torch_trace, checks), notes=tuple(self.torch.notes), **names
        )
        return verdict.merged(torch_result, warp_result)

    def _torch_trace(self):
        if self.torch is None:
            return None
        from gradcheck.model.trace import Trace

        device = ", ".join(self.torch.devices) or None
        return Trace(scenario="program", fault=None, device=device or "cpu", **self.torch.trace_fields())

    def _warp_judged(self, trace, checks: CheckOptions, notes: list, **fields) -> ScenarioResult:
        from gradcheck.engine import verdict

        observer = self.observer
        graphs, window = observer.graphs, observer.window
        if graphs.replays:
            unaudited = graphs.replays - graphs.audited
            notes.append(
                f"{graphs.replays} graph replay(s) (wp.capture_launch): {graphs.audited} audited as "
                "a backward of the tape captured in the graph"
                + (f", {unaudited} ran a graph with no backward captured in it (a forward)" if unaudited else "")
            )
        if not observer.backwards and not (self.torch is not None and self.torch.backwards):
            notes.append("the program never called tape.backward: nothing to audit")
        if window.audited < observer.backwards:
            cadence = window.cadence
            notes.append(
                f"{window.audited} of {observer.backwards} backwards audited in full: the first {cadence.first}, "
                f"then every {cadence.every}th and the one after it (--audit-every 1 audits every backward)"
            )
        notes.extend(observer.notes)
        fields.setdefault("device", trace.device)
        return verdict.result(trace, verdict.judge(trace, checks), notes=tuple(notes), **fields)


def _torch_params(params: dict | None) -> dict:
    """The declared params that are torch tensors (``gradcheck.audit(params={"w": w})`` on a PyTorch program)."""
    torch = sys.modules.get("torch")
    if not params or torch is None:
        return {}
    return {k: v for k, v in params.items() if isinstance(v, torch.Tensor)}


def _device() -> str | None:
    """Warp's default device, asked only if the program initialised Warp: asking would initialise it (its banner
    on the program's stdout after the fact); a program that never did reports no device."""
    import sys

    warp = sys.modules.get("warp")
    if warp is None:
        return None
    try:
        from gradcheck.warp_compat.runtime import internal_module

        if getattr(internal_module("context"), "runtime", None) is None:
            return None
        return str(warp.get_device())
    except Exception:  # noqa: BLE001 - the report says "?" rather than fail
        return None


def _cache_hint() -> str:
    """For a program that failed after importing Warp: '; ' and why Warp cannot use its kernel cache (a
    WARP_CACHE_PATH it cannot create or write to), when that is so. The failure stays the program's own (exit 3):
    gradcheck never initialises Warp around a program, so the program met it first, as it would under python."""
    import sys

    if "warp" not in sys.modules:
        return ""
    from gradcheck.engine.environment import kernel_cache_problem

    try:
        problem = kernel_cache_problem()
    except Exception:  # noqa: BLE001 - a hint, never a second failure
        return ""
    return f"; {problem}" if problem else ""
