"""`gradcheck run SPEC...`: run scenarios' passes, check their gradients, print the report."""

from __future__ import annotations

from pathlib import Path

import typer

from gradcheck.cli.output import check_writable, emit, error_line, input_files, stdout_to_stderr, usage_report
from gradcheck.formats import OutputFormat
from gradcheck.model.errors import UsageError
from gradcheck.model.options import DEFAULT_CHECKS, DEFAULT_FD, DEFAULT_RUN, BlameMode, FailOn, FDMode

DEVICE_HELP = "cpu or cuda:N (default: cuda:0 when available, else cpu)"
# the check thresholds `run`, `blame` and `exec` share (defaults from gradcheck.model.options, stated once)
MAX_NORM = typer.Option(DEFAULT_CHECKS.max_norm, "--max-norm", help="explosion: gradient norm above this is an error")


def run(
    specs: list[str] = typer.Argument(..., metavar="SPEC...", help="built-in name, file.py[:Name], pkg.mod:Name"),
    device: str = typer.Option(None, "--device", help=DEVICE_HELP),
    passes: int = typer.Option(DEFAULT_RUN.passes, "--passes", help="forward/backward passes per scenario"),
    fault: str = typer.Option(None, "--fault", help="run a fault variant (see `gradcheck list`)"),
    settings: list[str] = typer.Option(None, "--set", metavar="KEY=VALUE", help="scenario option; repeatable"),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="report format"),
    output: Path = typer.Option(None, "--output", help="write the report to FILE instead of stdout"),
    fail_on: FailOn = typer.Option(FailOn.error, "--fail-on", help="lowest severity that makes the exit code 1"),
    clip_norm: float = typer.Option(
        None, "--clip-norm", help="clip the params' gradients to this global norm after each pass; show both norms"
    ),
    max_norm: float = MAX_NORM,
    trace_nonfinite: bool = typer.Option(
        False, "--trace-nonfinite", help="on NaN/Inf, re-run with wp.config.verify_fp and name the first bad operation"
    ),
    fd: FDMode = typer.Option(
        FDMode.fast, "--fd", help="finite-difference check: directional (fast), per element, off"
    ),
    fd_warn: float = typer.Option(
        DEFAULT_FD.warn, "--fd-warn", help="fd-mismatch: relative error from which it is a warning"
    ),
    fd_error: float = typer.Option(
        DEFAULT_FD.error, "--fd-error", help="fd-mismatch: relative error from which it is an error"
    ),
    replay: bool = typer.Option(
        True, "--replay/--no-replay", help="the reentrancy probe (backward twice on one more forward)"
    ),
    blame: BlameMode = typer.Option(
        BlameMode.auto, "--blame", help="per-launch adjoint test: when fd-mismatch fires (auto), always, off"
    ),
    timeout: float = typer.Option(
        None,
        "--timeout",
        help="stop a scenario after SECONDS and report it as an error (runs them in a worker process)",
    ),
    quiet: bool = typer.Option(False, "--quiet", help="no progress on stderr"),
    debug: bool = typer.Option(False, "--debug", help="show tracebacks"),
) -> None:
    """Run scenarios' forward/backward passes and check their gradients."""
    from gradcheck.cli.progress import progress_bars
    from gradcheck.engine import pipeline
    from gradcheck.model.options import CheckOptions, FDOptions, RunOptions, parse_settings

    try:
        options = RunOptions(
            device=device,
            passes=passes,
            fault=fault,
            settings=parse_settings(settings or []),
            fail_on=fail_on,
            debug=debug,
            clip_norm=clip_norm,
            checks=CheckOptions(max_norm=max_norm),
            trace_nonfinite=trace_nonfinite,
            fd=FDOptions(mode=fd, warn=fd_warn, error=fd_error),
            replay=replay,
            blame=blame,
            timeout=timeout,
        )
        try:
            check_writable(output, inputs=input_files(specs))
        except UsageError:
            output = None  # the usage error is then reported on stdout, once
            raise
        with stdout_to_stderr(), progress_bars(quiet, len(specs)) as bars:
            report = pipeline.run(specs, options, bars and bars.passes, bars and bars.scenarios)
    except UsageError as exc:
        report = usage_report(str(exc), fail_on)
    for result in report.scenarios:
        if result.error:
            error_line(result.error)
            if debug and result.traceback:
                typer.echo(result.traceback, err=True)
    if report.error:
        error_line(report.error)
    emit(report, fmt, output)
    raise typer.Exit(int(report.exit_code))
