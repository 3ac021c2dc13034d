"""`gradcheck exec script.py [ARGS...]` / `gradcheck exec -m module [ARGS...]`: audit an unmodified program.

Like ``coverage run`` or compute-sanitizer: the program runs exactly as it would under ``python`` (engine.hosting:
its argv, sys.path, ``__main__``, signals, output and traceback are python's), and gradcheck is loud only about
its findings: the report comes after everything the program wrote, on the stdout gradcheck started with and on a
line of its own (or goes to --output, refreshed as the run goes), then gradcheck's one error line on stderr when
there is something to say. Everything after the script (or the module) is the program's, not gradcheck's:
``gradcheck exec -m newton.examples diffsim_ball --viewer null --device cpu``.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

import typer

from gradcheck.cli.output import is_regular_target
from gradcheck.cli.reporting import IGNORE, SELECT, VERBOSE, format_option, judged, suppressions, usage_exit
from gradcheck.cli.run import GRAPH, MAX_NORM, draw_graph
from gradcheck.formats import OutputFormat, check_supported
from gradcheck.model.errors import UsageError
from gradcheck.model.exit_codes import ExitCode, combine
from gradcheck.model.options import AUDIT_EVERY, AUDIT_FIRST, FailOn

SETTINGS = {"allow_interspersed_args": False, "ignore_unknown_options": True, "allow_extra_args": True}


def exec_program(
    program: list[str] = typer.Argument(None, metavar="SCRIPT.py [ARGS...]", help="the program and its arguments"),
    module: str = typer.Option(None, "-m", metavar="MODULE", help="run a module, as python -m MODULE"),
    fmt: OutputFormat = format_option("exec"),
    output: Path = typer.Option(
        None,
        "--output",
        metavar="FILE",
        help="write the report to FILE instead of stdout (refreshed at most once a second)",
    ),
    fail_on: FailOn = typer.Option(FailOn.error, "--fail-on", help="lowest severity that makes the exit code 1"),
    select: list[str] = SELECT,
    ignore: list[str] = IGNORE,
    verbose: bool = VERBOSE,
    keep_going: bool = typer.Option(
        False, "--keep-going", help="skip a backward that would write through a dangling pointer, instead of stopping"
    ),
    max_norm: float = MAX_NORM,
    debug: bool = typer.Option(False, "--debug", help="also put the program's traceback in the report"),
    audit_first: int = typer.Option(
        AUDIT_FIRST, "--audit-first", min=0, metavar="N", help="audit the program's first N backwards in full"
    ),
    audit_every: int = typer.Option(
        AUDIT_EVERY,
        "--audit-every",
        min=1,
        metavar="N",
        help="after them, audit every Nth backward and the one after it (1: every backward)",
    ),  # fmt: skip
    blame: bool = typer.Option(
        False, "--blame", help="test every launch of one backward's tape against its own finite differences"
    ),
    blame_at: int = typer.Option(
        None, "--blame-at", min=1, metavar="N", help="the backward --blame tests (default 1; implies --blame)"
    ),
    adjoint_test: bool = typer.Option(
        True,
        "--adjoint-test/--no-adjoint-test",
        help="test each kernel's adjoint on the values of its first launch (against its own finite differences)",
    ),
    graph: Path = GRAPH,
) -> None:
    """Run an unmodified Warp program and audit its tape.backward and tape.zero calls (a long run: the first ones
    in full, then sampled pairs; --audit-every 1 for all)."""
    from gradcheck.checks import not_judged_under_exec
    from gradcheck.engine.program_audit import audit_program
    from gradcheck.model import dataflow
    from gradcheck.model.options import CheckOptions

    program = list(program or [])
    try:
        check_supported("exec", fmt)
        rules = suppressions(select, ignore)
        target, output, graph = _checked(program, module, output, graph)
        checks = CheckOptions(max_norm=max_norm)
    except UsageError as exc:
        raise usage_exit("exec", exc, fmt, output, fail_on=fail_on) from None
    from gradcheck.cli.output import KeptStdio

    stdio = KeptStdio(report_on_stdout=output is None)
    unjudged = not_judged_under_exec(blame=adjoint_test or blame or blame_at is not None)  # JUnit: skipped, not passed
    refreshing = output is not None and is_regular_target(output)
    refresher = _Refresher(output, fmt, fail_on, rules, unjudged) if refreshing else None
    with dataflow.collecting() if graph is not None else contextlib.nullcontext([]) as pictures:
        result, run = audit_program(
            target, program, module=module is not None, keep_going=keep_going, checks=checks, refresh=refresher,
            top_level=True, cadence=(audit_first, audit_every),
            blame_at=blame_at if blame_at is not None else (1 if blame else None), adjoint_test=adjoint_test,
        )  # fmt: skip
    if refresher is not None:
        refresher.close()
    report = judged(_report(result, run, fail_on, debug), rules, unjudged)
    stopped = (run.error,) if run.stopped else ()  # like a sanitizer: why the program ended, in one line
    code = _deliver(report, fmt, output, stdio, stopped, verbose)
    if graph is not None and not draw_graph(
        graph, pictures, report.scenarios, lambda m: stdio.line(m, kind="note"), stdio.line
    ):
        code = int(combine([ExitCode(code), ExitCode.USAGE]))
    raise typer.Exit(code)


def _checked(
    program: list[str], module: str | None, output: Path | None, graph: Path | None = None
) -> tuple[str, Path | None, Path | None]:
    """The target, and --output and --graph made absolute (the program may chdir); every usage error before
    anything runs."""
    from gradcheck.cli.run import check_paths
    from gradcheck.engine.program_files import program_inputs

    if module is None and not program:
        raise UsageError("give the program to run: gradcheck exec script.py [ARGS...] or -m module [ARGS...]")
    target = module or program.pop(0)
    if module is None:
        from gradcheck.engine.program_files import check_script

        check_script(target)
    if output is not None:
        output = Path(os.path.abspath(os.path.expanduser(output)))
    if graph is not None:
        graph = Path(os.path.abspath(os.path.expanduser(graph)))
    check_paths(output, graph, program_inputs(target, module is not None))
    if output is None and _closed(1):
        raise UsageError("stdout is closed, so the report could not be written; give --output FILE")
    return target, output, graph


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


def _report(result, run, fail_on: FailOn, debug: bool):
    from dataclasses import replace

    from gradcheck.engine.environment import describe
    from gradcheck.model.options import severity
    from gradcheck.model.report import Report

    if not debug:
        result = replace(result, traceback=None)
    report = Report(environment=describe(result.device), scenarios=(result,), fail_on=severity(fail_on))
    if run.interrupted is not None:
        report = replace(report, error=f"interrupted by {run.interrupted.what}", error_code=run.interrupted.exit_code)
    return report


def _deliver(
    report, fmt: OutputFormat, output: Path | None, stdio, said: tuple[str, ...] = (), verbose: bool = False
) -> int:
    """The report to --output or the original stdout, then gradcheck's error lines (``said`` first); the exit
    code."""
    from gradcheck.cli.output import ReportNotWritten, write_report_file
    from gradcheck.engine.hosting import flush_program_streams
    from gradcheck.formats import render

    code = report.exit_code
    lost = None
    flush_program_streams()  # what the program left buffered comes before the report, also in --output /dev/stdout
    try:
        if output is not None:
            write_report_file(output, render(report, fmt, color=False, width=100, verbose=verbose))
        else:
            stdio.report(render(report, fmt, color=stdio.color, width=stdio.width, verbose=verbose))
    except OSError as exc:
        lost = f"cannot write --output {str(output)!r}: {exc.strerror or exc}"
    except ReportNotWritten as exc:
        lost = f"the report could not be written to stdout ({exc}); give --output FILE"
    for message in (*said, report.error, report.scenarios[0].error, lost):
        if message:
            stdio.line(message)
    return int(combine([code, ExitCode.USAGE]) if lost else code)


class _Refresher:
    """--output rewritten while the program runs (from an interim result, at most once a second), so a run that
    never reaches its end (``os._exit``, SIGKILL) still leaves its last audit on disk. Failures are silent: the
    final write says them. Closed before the final write, so no late refresh can replace it."""

    def __init__(self, output: Path, fmt: OutputFormat, fail_on: FailOn, rules, unjudged: dict[str, str]) -> None:
        self.output, self.fmt, self.fail_on, self.rules, self.unjudged = output, fmt, fail_on, rules, unjudged
        self._lock = threading.Lock()
        self._closed = False

    def __call__(self, result) -> None:
        from gradcheck.cli.output import write_report_file
        from gradcheck.cli.reporting import judged
        from gradcheck.engine.environment import describe
        from gradcheck.formats import render
        from gradcheck.model.options import severity
        from gradcheck.model.report import Report

        report = Report(environment=describe(result.device), scenarios=(result,), fail_on=severity(self.fail_on))
        report = judged(report, self.rules, self.unjudged)
        text = render(report, self.fmt, color=False, width=100)
        with self._lock:
            if not self._closed:
                try:
                    write_report_file(self.output, text)
                except OSError:
                    pass

    def close(self) -> None:
        with self._lock:
            self._closed = True
