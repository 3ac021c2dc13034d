"""What ``gradcheck exec`` does once its command line is read, without Typer: the usage checks, the program under
the observer, the report. ``exec_program`` (the Typer command) and ``exec_fast`` (a plain command line read
without Typer) both call :func:`run_exec`, so a plain ``gradcheck exec`` never imports Typer, Rich, the checks or
the formats before the program's first line: only hosting and the option checks run before it (Typer and the other
commands were ~20 ms of every run; tests/test_exec_startup.py keeps it so).
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

from gradcheck.model.errors import UsageError
from gradcheck.model.exit_codes import ExitCode, combine


def run_exec(
    program: list[str] | None, module: str | None, fmt, output: Path | None, fail_on, select: list[str] | None,
    ignore: list[str] | None, verbose: bool, keep_going: bool, max_norm: float | None, debug: bool, audit_first: int,
    audit_every: int, blame: bool, blame_at: int | None, adjoint_test: bool, graph: Path | None,
    root: Path | None = None, html: Path | None = None,
) -> int:  # fmt: skip
    """``gradcheck exec``'s exit code, its options as exec_program declares them (already parsed)."""
    from gradcheck.cli.output import is_regular_target
    from gradcheck.cli.reporting import judged, source_root, suppressions, usage_error
    from gradcheck.engine.launcher import current
    from gradcheck.engine.program_audit import audit_program
    from gradcheck.formats import check_supported
    from gradcheck.model import dataflow
    from gradcheck.model.options import CheckOptions

    program = list(program or [])
    launch = current()  # a rank of torchrun or srun: its own report file, the program's exit status (engine.launcher)
    if launch is not None:
        keep_going = True  # a finding never stops a rank: the launcher would take it for a crash
        if output is None:
            from gradcheck.formats import OutputFormat

            fmt = OutputFormat.json  # what `gradcheck combine` reads
        output = _rank_output(output, launch)  # before anything can fail: a usage error is reported there too
    try:
        check_supported("exec", fmt)
        rules = suppressions(select, ignore)
        rooted = source_root(root)
        target, output, graph = _checked(program, module, output, graph)
        html = _page_folder(html, output, target, module is not None, graph)
        checks = CheckOptions(max_norm=max_norm)
    except UsageError as exc:
        return usage_error("exec", exc, fmt, output, fail_on=fail_on)
    from gradcheck.cli.output import KeptStdio

    stdio = KeptStdio(report_on_stdout=output is None)
    blamed = adjoint_test or blame or blame_at is not None
    refresher = (
        _Refresher(output, fmt, fail_on, rules, blamed, rooted)
        if output is not None and is_regular_target(output)
        else None
    )
    drawing = graph is not None or html is not None
    with dataflow.collecting() if drawing else contextlib.nullcontext([]) as pictures:
        result, run = audit_program(
            target, program, module=module is not None, keep_going=keep_going, checks=checks, refresh=refresher,
            top_level=True, cadence=(audit_first, audit_every),
            blame_at=blame_at if blame_at is not None else (1 if blame else None), adjoint_test=adjoint_test,
        )  # fmt: skip
    if refresher is not None:
        refresher.close()
    report = judged(_report(result, run, fail_on, debug, launch), rules, _unjudged(blamed), root=rooted)
    stopped = (run.error,) if run.stopped else ()  # like a sanitizer: why the program ended, in one line
    code = _deliver(report, fmt, output, stdio, stopped, verbose, launched=launch is not None)
    if html is not None:
        from gradcheck.cli import report_page

        said = (
            None if launch is not None else (lambda m: stdio.line(m, kind="note"))
        )  # a rank's stderr is the program's
        failed = report_page.write(_rank_page(html, launch), report, pictures, said, stdio.line)
        if failed is not None:
            code = int(combine([ExitCode(code), failed]))
    if launch is not None:
        return run.status  # the rank ends as the program did; the verdict is `gradcheck combine`'s
    if graph is not None:
        from gradcheck.cli.run import draw_graph

        if not draw_graph(graph, pictures, report.scenarios, lambda m: stdio.line(m, kind="note"), stdio.line):
            code = int(combine([ExitCode(code), ExitCode.USAGE]))
    return code


def _unjudged(blamed: bool) -> dict[str, str]:
    """The checks exec gives no evidence to (JUnit: skipped, not passed); asked after the program: the checks'
    modules are the report's, not the program's start-up."""
    from gradcheck.checks import not_judged_under_exec

    return not_judged_under_exec(blame=blamed)


def _checked(
    program: list[str], module: str | None, output: Path | None, graph: Path | None = None
) -> tuple[str, Path | None, Path | None]:
    """The target, and --output and --graph made absolute (the program may chdir); every usage error before
    anything runs."""
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
    if output is not None or graph is not None:  # run's check of both (it imports Typer: only when they are given)
        from gradcheck.cli.run import check_paths

        check_paths(output, graph, program_inputs(target, module is not None))
    from gradcheck.cli.output import is_open

    if output is None and not is_open(1):
        raise UsageError("stdout is closed, so the report could not be written; give --output FILE")
    return target, output, graph


def _page_folder(html: Path | None, output: Path | None, target: str, module: bool, graph: Path | None) -> Path | None:
    """--html checked before the program starts (report_page.checked); None when not given (nothing imported)."""
    if html is None:
        return None
    from gradcheck.cli import report_page
    from gradcheck.engine.program_files import program_inputs

    return report_page.checked(html, output, program_inputs(target, module), {"--graph": graph})


def _rank_page(html: Path, launch) -> Path:
    """Under a launcher each rank writes its own page, in ``DIR/rank<R>`` (combine's --html draws the job's)."""
    return html if launch is None else html / f"rank{launch.rank}"


def _rank_output(output: Path | None, launch) -> Path | None:
    """--output made this rank's under a launcher (engine.launcher), absolute (the program may chdir); a device
    (/dev/stdout) is each process's own: used as it is."""
    from gradcheck.cli.output import is_regular_target

    if output is not None:
        output = Path(os.path.abspath(os.path.expanduser(output)))
    return launch.output(output) if output is None or is_regular_target(output) else output


def _report(result, run, fail_on, debug: bool, launch=None):
    """The Report of one audited program; a rank's names the launcher, the rank, the world size and the restart
    (engine.launcher: what combining the ranks' reports reads)."""
    from dataclasses import replace

    from gradcheck.engine.environment import describe
    from gradcheck.model.options import severity
    from gradcheck.model.report import Report

    if not debug:
        result = replace(result, traceback=None)
    environment = describe(result.device)
    if launch is not None:
        environment = {**environment, **launch.environment()}
    report = Report(environment=environment, scenarios=(result,), fail_on=severity(fail_on))
    if run.interrupted is not None:
        report = replace(report, error=f"interrupted by {run.interrupted.what}", error_code=run.interrupted.exit_code)
    return report


def _deliver(
    report, fmt, output: Path | None, stdio, said: tuple[str, ...] = (), verbose: bool = False, launched: bool = False
) -> int:
    """The report to --output or the original stdout, then gradcheck's error lines (``said`` first; a rank of a
    launched job says only that its report was lost: the rest is in the report, and its stderr is the program's);
    the exit code."""
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
    for message in (lost,) if launched else (*said, report.error, report.scenarios[0].error, lost):
        if message:
            stdio.line(message)
    return int(combine([code, ExitCode.USAGE]) if lost else code)


class _Refresher:
    """--output rewritten while the program runs (from an interim result, at most once a second), so a run that
    never reaches its end (``os._exit``, SIGKILL) still leaves its last audit on disk. Failures are silent: the
    final write says them. Closed before the final write, so no late refresh can replace it."""

    def __init__(self, output: Path, fmt, fail_on, rules, blamed: bool, root: str | None = None) -> None:
        self.output, self.fmt, self.fail_on, self.rules, self.blamed = output, fmt, fail_on, rules, blamed
        self.root = root
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
        report = judged(report, self.rules, _unjudged(self.blamed), root=self.root)
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
