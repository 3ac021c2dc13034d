"""`gradcheck run SPEC...`: run scenarios' passes, check their gradients, print the report."""

from __future__ import annotations

from pathlib import Path

import typer

from gradcheck.cli.output import check_writable, error_line, input_files, note_line, stdout_to_stderr
from gradcheck.cli.reporting import (
    HTML,
    IGNORE,
    OUTPUT,
    SELECT,
    SOURCE_ROOT,
    VERBOSE,
    deliver,
    format_option,
    judged,
    source_root,
    suppressions,
    usage_exit,
)
from gradcheck.formats import OutputFormat, check_supported
from gradcheck.model import dataflow
from gradcheck.model.errors import UsageError
from gradcheck.model.exit_codes import ExitCode, combine
from gradcheck.model.options import DEFAULT_CHECKS, DEFAULT_FD, DEFAULT_RUN, BlameMode, FailOn, FDMode

DEVICE_HELP = "cpu or cuda:N (default: cuda:0 when available, else cpu)"
# the check thresholds `run`, `blame` and `exec` share (defaults from gradcheck.model.options, stated once)
MAX_NORM = typer.Option(
    None,
    "--max-norm",
    help=f"explosion: a gradient norm above this is an error (default {DEFAULT_CHECKS.max_norm:g}, which spares a "
    "gradient that only grew as the loss did; a value you give holds whatever the loss did)",
)
GRAPH = typer.Option(
    None,
    "--graph",
    metavar="FILE",
    help="also draw one backward's dataflow with what is wrong marked: .svg/.png (needs Graphviz dot), else dot",
)


def run(
    specs: list[str] = typer.Argument(..., metavar="SPEC...", help="built-in name, file.py[:Name], pkg.mod:Name"),
    device: str = typer.Option(None, "--device", help=DEVICE_HELP),
    passes: int = typer.Option(DEFAULT_RUN.passes, "--passes", help="forward/backward passes per scenario"),
    fault: str = typer.Option(None, "--fault", help="run a fault variant (see `gradcheck list`)"),
    settings: list[str] = typer.Option(None, "--set", metavar="KEY=VALUE", help="scenario option; repeatable"),
    fmt: OutputFormat = format_option("run"),
    output: Path = OUTPUT,
    fail_on: FailOn = typer.Option(FailOn.error, "--fail-on", help="lowest severity that makes the exit code 1"),
    select: list[str] = SELECT,
    ignore: list[str] = IGNORE,
    verbose: bool = VERBOSE,
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
    graph: Path = GRAPH,
    root: Path = SOURCE_ROOT,
    html: Path = HTML,
) -> None:
    """Run scenarios' forward/backward passes and check their gradients."""
    from gradcheck.cli import report_page
    from gradcheck.cli.progress import progress_bars
    from gradcheck.engine import pipeline
    from gradcheck.model.options import CheckOptions, FDOptions, RunOptions, parse_settings

    pictures: list = []  # --graph: the drivers' (scenario name, Dataflow | None)
    try:  # every gradcheck option checked before any scenario code runs
        check_supported("run", fmt)
        rules, rooted = suppressions(select, ignore), source_root(root)
        options = RunOptions(
            device=device, passes=passes, fault=fault, settings=parse_settings(settings or []), fail_on=fail_on,
            debug=debug, clip_norm=clip_norm, checks=CheckOptions(max_norm=max_norm), trace_nonfinite=trace_nonfinite,
            fd=FDOptions(mode=fd, warn=fd_warn, error=fd_error), replay=replay, blame=blame, timeout=timeout,
        )  # fmt: skip
        check_paths(output, graph, input_files(specs))
        html = report_page.checked(html, output, input_files(specs), {"--graph": graph})
    except UsageError as exc:
        raise usage_exit("run", exc, fmt, output, fail_on=fail_on) from None
    try:
        with stdout_to_stderr(), progress_bars(quiet, len(specs)) as bars, dataflow.collecting() as pictures:
            report = pipeline.run(specs, options, bars and bars.passes, bars and bars.scenarios)
    except UsageError as exc:
        raise usage_exit("run", exc, fmt, output, fail_on=fail_on) from None
    report = judged(report, rules, root=rooted)
    _say_errors(report, debug)
    deliver(report, fmt, output, verbose=verbose)
    raise typer.Exit(int(_artifacts(report, graph, html, pictures, timeout)))


def _say_errors(report, debug: bool) -> None:
    """Each scenario that could not run, and a run-level error, as one stderr line (its traceback with --debug)."""
    for result in report.scenarios:
        if result.error:
            error_line(result.error)
            if debug and result.traceback:
                typer.echo(result.traceback, err=True)
    if report.error:
        error_line(report.error)


def _artifacts(report, graph: Path | None, html: Path | None, pictures, timeout: float | None) -> ExitCode:
    """--graph and --html after the report; the exit code, the usage error's when one could not be written."""
    from gradcheck.cli import report_page

    code = _drawn(graph, pictures, report, timeout)
    failed = report_page.write(html, report, pictures, note_line) if html is not None else None
    return combine([code, failed]) if failed is not None else code


def _drawn(graph: Path | None, pictures, report, timeout: float | None) -> ExitCode:
    """--graph after the report; the exit code, the usage error's when the picture could not be written."""
    if graph is None:
        return report.exit_code
    if timeout is not None:
        note_line("--graph: nothing drawn, since --timeout runs the scenarios in worker processes; run without it")
        return report.exit_code
    written = draw_graph(graph, pictures, report.scenarios, note_line, error_line)
    return report.exit_code if written else combine([report.exit_code, ExitCode.USAGE])


def check_paths(output: Path | None, graph: Path | None, inputs) -> None:
    """--output and --graph, checked before anything runs: a directory, an unwritable place, one of the run's
    inputs, or --graph naming the report's own file is a usage error."""
    check_writable(output, inputs=inputs)
    if graph is None:
        return
    check_writable(graph, "--graph", inputs)
    if output is not None and graph.expanduser().resolve() == output.expanduser().resolve():
        raise UsageError(f"--graph and --output both name {str(graph)!r}; give the picture a file of its own")


def draw_graph(path: Path, pictures, scenarios, say, fail) -> bool:
    """--graph, after the report: the picture of the first scenario with findings (else the first) whose backward
    was audited, drawn with its findings marked. ``pictures``: the (name, Dataflow | None) the drivers kept;
    ``say`` and ``fail`` print one line (a note, an error). False when the file could not be written (exit 2)."""
    from gradcheck.formats.dot_graph import write_graph

    drawn = {name: picture for name, picture in pictures if picture is not None}
    candidates = [s for s in scenarios if s.name in drawn]
    if not candidates:
        say(f"--graph: no backward was audited, so there is no dataflow to draw; {str(path)!r} was not written")
        return True
    chosen = next((s for s in candidates if s.findings), candidates[0])
    try:
        told = write_graph(path, drawn[chosen.name], chosen.findings)
    except OSError as exc:
        fail(f"cannot write --graph {str(path)!r}: {exc.strerror or exc}")
        return False
    if len(scenarios) > 1:
        say(f"--graph draws one scenario: {chosen.name} (backward {drawn[chosen.name].backward})")
    if told:
        say(told)
    return True
