"""``gradcheck blame SPEC``: which launch's adjoint is wrong, tested launch by launch (adjoint-mismatch)."""

from __future__ import annotations

from pathlib import Path

import typer

from gradcheck.cli.reporting import HTML, IGNORE, OUTPUT, SELECT, SOURCE_ROOT, VERBOSE, format_option
from gradcheck.cli.run import DEVICE_HELP, GRAPH, MAX_NORM
from gradcheck.formats import OutputFormat
from gradcheck.model.options import DEFAULT_FD, FailOn, FDMode


def blame(
    specs: list[str] = typer.Argument(..., metavar="SPEC...", help="built-in name, file.py[:Name], pkg.mod:Name"),
    device: str = typer.Option(None, "--device", help=DEVICE_HELP),
    fault: str = typer.Option(None, "--fault", help="run a fault variant (see `gradcheck list`)"),
    settings: list[str] = typer.Option(None, "--set", metavar="KEY=VALUE", help="scenario option; repeatable"),
    fmt: OutputFormat = format_option("blame"),
    output: Path = OUTPUT,
    fail_on: FailOn = typer.Option(FailOn.error, "--fail-on", help="lowest severity that makes the exit code 1"),
    select: list[str] = SELECT,
    ignore: list[str] = IGNORE,
    verbose: bool = VERBOSE,
    fd: FDMode = typer.Option(FDMode.fast, "--fd", help="finite-difference check of the whole gradient too"),
    max_norm: float = MAX_NORM,
    quiet: bool = typer.Option(False, "--quiet", help="no progress on stderr"),
    debug: bool = typer.Option(False, "--debug", help="show tracebacks"),
    graph: Path = GRAPH,
    root: Path = SOURCE_ROOT,
    html: Path = HTML,
) -> None:
    """Test every launch's adjoint on the values it ran on: one row per kernel (`run --blame always`, one pass)."""
    from gradcheck.cli.run import run
    from gradcheck.model.options import BlameMode

    run(
        specs=specs,
        device=device,
        passes=1,
        fault=fault,
        settings=settings,
        fmt=fmt,
        output=output,
        fail_on=fail_on,
        select=select,
        ignore=ignore,
        verbose=verbose,
        clip_norm=None,
        max_norm=max_norm,
        trace_nonfinite=False,
        fd=fd,
        fd_warn=DEFAULT_FD.warn,
        fd_error=DEFAULT_FD.error,
        replay=False,
        blame=BlameMode.always,
        timeout=None,
        quiet=quiet,
        debug=debug,
        graph=graph,
        root=root,
        html=html,
    )
