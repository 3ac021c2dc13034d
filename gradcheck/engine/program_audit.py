"""``gradcheck exec``: run an unmodified program with its tapes audited, and report it as one scenario.

The program runs in this process, as ``python script.py ARGS`` or ``python -m module ARGS`` would run it
(runpy, ``sys.argv``, ``sys.path[0]``), its output untouched; gradcheck.probes.tape_audit records every
``tape.backward`` and ``tape.zero``; this module turns the records into findings (each with the iteration and
the call site in its evidence) and one ScenarioResult: ``name`` the script or module, ``passes`` the backward
calls seen. A program that fails (an exception, a nonzero exit status) is exit 3 with its status and last
error line, its audit still reported; Ctrl-C reports what ran.
"""

from __future__ import annotations

import os
import runpy
import sys
import time
import traceback
from dataclasses import dataclass, replace

from gradcheck.model.exit_codes import ExitCode
from gradcheck.model.findings import Finding, Severity
from gradcheck.model.report import ParamSummary, ScenarioResult

MAX_NORM = 1e6  # explosion, as `gradcheck run --max-norm`


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

    saved_argv, saved_path, saved_stderr = sys.argv[:], sys.path[:], sys.stderr
    sys.stderr = tail = _LastLine(sys.stderr)
    started = time.perf_counter()
    from gradcheck.probes.tape_audit import DanglingAdjointStop

    status = error = trace = interrupted = None
    stopped = False
    try:
        with watch():
            if module:
                sys.argv = [target, *args]
                runpy.run_module(target, run_name="__main__", alter_sys=True)
            else:
                sys.argv = [target, *args]
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
    target: str, args: list[str], module: bool = False, keep_going: bool = False
) -> tuple[ScenarioResult, ProgramRun]:
    from gradcheck.probes.tape_audit import TapeAudit

    def roots() -> dict:
        """Where the program keeps its state right now: its globals (runpy makes it sys.modules["__main__"]),
        then the locals of every frame on the stack, outermost first (Newton's example runner keeps
        ``example`` in a local of ``newton.examples.run``); the first name for an object wins."""
        import inspect

        main = sys.modules.get("__main__")
        found = dict(getattr(main, "__dict__", {}) or {})
        own = ("__main__", target) if module else ("__main__",)
        frames = []
        frame = inspect.currentframe()
        while frame is not None:
            if (frame.f_globals.get("__name__", "") or "").split(".")[0] not in ("gradcheck", "warp", "runpy"):
                frames.append(frame)
            frame = frame.f_back
        for frame in reversed(frames):
            for key, value in frame.f_locals.items():
                found.setdefault(key, value)
        # the program's own objects before the libraries' (a viewer holding the model): names start there
        return dict(sorted(found.items(), key=lambda kv: not type(kv[1]).__module__.startswith(own)))

    from gradcheck.probes.allocations import AllocationLedger

    ledger = AllocationLedger().install()
    audit = TapeAudit(roots=roots, ledger=ledger, keep_going=keep_going)
    try:
        with audit.installed():
            run = run_program(target, args, module)
    finally:
        ledger.uninstall()
    name = target if module or not args or args[0].startswith("-") else target
    if module and args and not args[0].startswith("-"):
        name = f"{target} {args[0]}"  # `-m newton.examples diffsim_ball`: the example, not the runner
    return replace(program_result(audit, run), name=name, spec=name), run


def program_result(audit, run: ProgramRun) -> ScenarioResult:
    findings = tuple(_findings(audit))
    error = code = None
    notes = []
    if run.stopped:
        notes.append(run.error)
    elif run.interrupted is None and run.status not in (None, 0):
        status = f"exited with status {run.status}" if isinstance(run.status, int) else "exited"
        error = f"{run.target}: the program {status}" + (f": {run.error}" if run.error else "")
        code = ExitCode.SCENARIO_ERROR
    if any(b.skipped for b in audit.backwards) and not run.stopped:
        notes.append("--keep-going: backwards with a dangling adjoint pointer were not launched")
    if audit.graph_replays:
        unaudited = audit.graph_replays - audit.audited_replays
        notes.append(
            f"{audit.graph_replays} graph replay(s) (wp.capture_launch): {audit.audited_replays} audited as a "
            "backward of the tape captured in the graph"
            + (f", {unaudited} unaudited (no backward seen before them)" if unaudited else "")
        )
    if not audit.backwards:
        notes.append("the program never called tape.backward: nothing to audit")
    return ScenarioResult(
        spec=run.target,
        name=run.target,
        device=_device(),
        passes=len(audit.backwards),
        params=_params(audit, findings),
        findings=findings,
        error=error,
        error_code=code,
        traceback=run.traceback,
        seconds=run.seconds,
        losses=tuple(b.loss for b in audit.backwards),
        notes=tuple(notes),
    )


def _device() -> str | None:
    try:
        import warp as wp

        return str(wp.get_device())
    except Exception:  # noqa: BLE001 - the report says "?" rather than fail
        return None


def _params(audit, findings) -> tuple[ParamSummary, ...]:
    flagged: dict[str, set] = {}
    for f in findings:
        for subject in f.evidence.get("subjects", [f.subject]):
            flagged.setdefault(subject, set()).add(f.check)
    history: dict[str, list] = {}
    for event in audit.backwards:
        for sample in event.grads:
            history.setdefault(sample.subject, []).append(sample)
    return tuple(
        ParamSummary(
            name=subject.removesuffix(".grad"),
            subject=subject,
            shape=samples[-1].shape,
            dtype=samples[-1].dtype,
            norms=tuple(s.norm if not (s.nan or s.inf) else float("nan") for s in samples),
            verdict=", ".join(sorted(flagged.get(subject, ()))) or "ok",
        )
        for subject, samples in history.items()
    )


def _findings(audit):
    """One finding per (check, subject), at its first iteration, with every iteration it was seen on."""
    seen: dict[tuple[str, str], list] = {}

    def note(check, subject, iteration, site, detail=None):
        seen.setdefault((check, subject), []).append((iteration, site, detail))

    history: dict[str, list[float]] = {}  # finite nonzero norms so far, per gradient
    for event in audit.backwards:
        for residue in event.residue:
            if residue.params_moved:
                note("accumulation", residue.subject, event.iteration, event.site, residue)
        for changed in event.changed:
            note("changed-before-backward", changed.subject, event.iteration, event.site, changed)
        for rewrite in event.rewrites:
            note("mutated-gradient", rewrite.subject, event.iteration - 1, event.site, rewrite)
        for pointer in event.pointers:
            note(pointer.check, pointer.subject, event.iteration, event.site, (pointer, event.skipped))
        for sample in event.grads:
            if sample.nan or sample.inf:
                note("nonfinite", sample.subject, event.iteration, event.site, (sample, event.loss))
            elif _blew_up(sample, history.get(sample.subject, [])):
                note("explosion", sample.subject, event.iteration, event.site, sample)
            if sample.norm and not (sample.nan or sample.inf):
                history.setdefault(sample.subject, []).append(sample.norm)
    for zero in audit.zeros:
        for survivor in zero.survivors:
            note("zero-audit", survivor.subject, zero.after_iteration, zero.site, survivor)
    zeros_only = {}
    for event in audit.backwards:
        for sample in event.grads:
            zeros_only.setdefault(sample.subject, []).append(sample.nonzero == 0 and not (sample.nan or sample.inf))
    for (check, subject), hits in seen.items():
        yield _finding(check, subject, hits, len(audit.backwards))
    unreached = [subject for subject, zeros in zeros_only.items() if zeros and all(zeros)]
    if unreached:  # one info for all of them: gradcheck inferred these leaves, the program never named them
        shown = ", ".join(unreached[:5]) + (f" and {len(unreached) - 5} more" if len(unreached) > 5 else "")
        yield Finding(
            check="missing-gradient",
            severity=Severity.INFO,
            subject=unreached[0],
            message=f"{len(unreached)} leaf array(s) that require grad have a gradient of exactly zero after every "
            f"backward they took part in: {shown}; the loss does not depend on them (often model constants)",
            hint="nothing, if they are not meant to be learned; else check the launches between them and the loss",
            evidence={"subjects": unreached, "iteration": 1, "site": audit.backwards[0].site},
        )


def _blew_up(sample, earlier: list[float]) -> bool:
    """Above --max-norm's default and a thousand times its own median so far: a sudden blow-up, reported as an
    info. Exec infers its params and they move under the program's optimizer: Newton's drone MPC jumps from 15 to
    3.6e6 on the body inertia's gradient when a freshly sampled trajectory meets the 1e4 collision penalty, which
    is its physics, not a bug. (`gradcheck run` judges explosion at fixed params, where it means more.)"""
    if sample.norm <= MAX_NORM or len(earlier) < 3:
        return False
    ordered = sorted(earlier)
    return sample.norm > 1e3 * ordered[len(ordered) // 2]


def _finding(check: str, subject: str, hits: list, backwards: int) -> Finding:
    iteration, site, detail = hits[0]
    iterations = [h[0] for h in hits]
    where = f" (iteration {iteration}, {site})" if site else f" (iteration {iteration})"
    evidence = {"iteration": iteration, "site": site, "iterations": iterations[:50], "count": len(hits)}
    if check == "accumulation":
        message = (
            f"{subject} already holds a gradient (norm {detail.norm:.4g}) when backward #{iteration} starts{where}, "
            "left by an earlier backward at other param values: this backward adds to it "
            f"({len(hits)} of {backwards} backwards)"
        )
        hint = "zero every gradient the tape reaches between optimizer steps: tape.zero() on the tape that recorded it"
        severity = Severity.ERROR
    elif check == "changed-before-backward":
        message = (
            f"{subject} changed after the forward recorded it and before backward #{iteration}{where}; backward "
            f"differentiated other values than the forward saw (read by {', '.join(detail.readers)})"
        )
        hint = f"change {subject} only after tape.backward, or record the forward again"
        severity = Severity.ERROR
    elif check == "mutated-gradient":
        writers = ", ".join(detail.writers[:3]) or "code outside a kernel launch"
        message = (
            f"{subject} was rewritten in place after backward #{iteration} and before the next zero or backward, "
            f"by {writers}: whatever reads it afterwards (logging, clipping stats) sees another gradient"
        )
        hint = "read or log the gradient before the optimizer step, or keep the optimizer's state in its own buffer"
        severity = Severity.WARNING
    elif check == "nonfinite":
        sample, loss = detail
        finite = loss is not None and loss == loss and abs(loss) != float("inf")
        message = (
            f"{subject} has {sample.nan} NaN and {sample.inf} Inf of {sample.size} values after backward "
            f"#{iteration}{where}; "
            + (f"the loss was finite ({loss:.6g}): backward alone produced it" if finite else "the loss was not finite")
        )
        hint = "guard the operation whose derivative is singular (sqrt, length, normalize at 0; log of 0)"
        severity = Severity.ERROR
        evidence["loss_finite"] = finite
    elif check == "explosion":
        message = (
            f"{subject} has norm {detail.norm:.4g} after backward #{iteration}{where}, over {MAX_NORM:g} and a "
            "thousand times its median on the backwards before"
        )
        hint = "if it is not expected (a contact, a penalty switching on), shorten the horizon or clip the gradient"
        severity = Severity.INFO  # params move under an optimizer: a spike can be the program's own physics
    elif check == "zero-audit":
        message = (
            f"{subject} is still nonzero ({detail.nonzero} of {detail.size} values, norm {detail.norm:.4g}) after "
            f"tape.zero(){' at ' + site if site else ''}, following backward #{iteration}: the next backward adds to it"
        )
        hint = f"zero {subject} yourself after tape.zero() (a struct field or an array the tape does not track)"
        severity = Severity.ERROR
    elif check in ("stale-adjoint", "dangling-adjoint"):
        pointer, skipped = detail
        if check == "dangling-adjoint":
            what = "backward was not launched (--keep-going)" if skipped else "gradcheck stopped the program there"
            message = (
                f"{subject} in a struct the tape uses points at freed memory before backward #{iteration}{where}: "
                f"backward would write the gradient there ({pointer.detail}); {what}"
            )
        else:
            message = (
                f"{subject} in a struct the tape uses is not the live array's gradient before backward "
                f"#{iteration}{where}: backward writes the gradient into another buffer ({pointer.detail})"
            )
        hint = "assign the array to the struct field again after changing its requires_grad or .grad"
        severity = Severity.ERROR
    return Finding(check=check, severity=severity, subject=subject, message=message, hint=hint, evidence=evidence)
