"""`gradcheck exec script.py [ARGS...]` / `gradcheck exec -m module [ARGS...]`: audit an unmodified program.

Like ``coverage run`` or compute-sanitizer: the program runs as it would under ``python``, its own output
untouched; the report comes after it (or goes to --output). Everything after the script (or the module) is the
program's, not gradcheck's: ``gradcheck exec -m newton.examples diffsim_ball --viewer null --device cpu``.
"""

from __future__ import annotations

from pathlib import Path

import typer

from gradcheck.cli.output import check_writable, emit, error_line, usage_report
from gradcheck.cli.run import MAX_NORM
from gradcheck.formats import OutputFormat
from gradcheck.model.errors import UsageError
from gradcheck.model.options import FailOn

SETTINGS = {"allow_interspersed_args": False, "ignore_unknown_options": True, "allow_extra_args": True}


def exec_program(
    program: list[str] = typer.Argument(None, metavar="SCRIPT.py [ARGS...]", help="the program and its arguments"),
    module: str = typer.Option(None, "-m", metavar="MODULE", help="run a module, as python -m MODULE"),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="report format"),
    output: Path = typer.Option(None, "--output", help="write the report to FILE instead of stdout"),
    fail_on: FailOn = typer.Option(FailOn.error, "--fail-on", help="lowest severity that makes the exit code 1"),
    keep_going: bool = typer.Option(
        False, "--keep-going", help="skip a backward that would write through a dangling pointer, instead of stopping"
    ),
    max_norm: float = MAX_NORM,
    debug: bool = typer.Option(False, "--debug", help="show the program's traceback when it fails"),
) -> None:
    """Run an unmodified Warp program and audit every tape.backward and tape.zero it makes."""
    from gradcheck.engine.environment import describe
    from gradcheck.engine.program_audit import audit_program
    from gradcheck.model.options import CheckOptions, severity
    from gradcheck.model.report import Report

    program = list(program or [])
    try:
        if module is None and not program:
            raise UsageError("give the program to run: gradcheck exec script.py [ARGS...] or -m module [ARGS...]")
        target = module or program.pop(0)
        if module is None and not Path(target).is_file():
            raise UsageError(f"no such script {target!r}; give a .py file, or -m module")
        check_writable(output, inputs=[Path(target)] if module is None else [])
        checks = CheckOptions(max_norm=max_norm)
    except UsageError as exc:
        emit(usage_report(str(exc), fail_on), fmt, None)
        error_line(str(exc))
        raise typer.Exit(2) from None
    result, run = audit_program(target, program, module=module is not None, keep_going=keep_going, checks=checks)
    if not debug:
        from dataclasses import replace

        result = replace(result, traceback=None)
    report = Report(environment=describe(result.device), scenarios=(result,), fail_on=severity(fail_on))
    if run.interrupted is not None:
        report = replace_error(report, f"interrupted by {run.interrupted.what}", run.interrupted.exit_code)
    if result.error:
        error_line(result.error)
    emit(report, fmt, output)
    raise typer.Exit(int(report.exit_code))


def replace_error(report, message: str, code):
    from dataclasses import replace

    error_line(message)
    return replace(report, error=message, error_code=code)
