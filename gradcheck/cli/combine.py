"""`gradcheck combine REPORT.json...`: one report from several (the ranks of a torchrun or srun job), as coverage.py's
``combine`` merges parallel data files; its exit code is the combined verdict (engine.combine does the work)."""

from __future__ import annotations

from pathlib import Path

import typer

from gradcheck.cli.reporting import HTML, OUTPUT, SOURCE_ROOT, VERBOSE, deliver, format_option, source_root, usage_exit
from gradcheck.formats import OutputFormat, check_supported
from gradcheck.model.errors import UsageError
from gradcheck.model.options import FailOn


def combine(
    reports: list[Path] = typer.Argument(None, metavar="REPORT.json...", help="JSON reports (exec --format json)"),
    fmt: OutputFormat = format_option("combine"),
    output: Path = OUTPUT,
    fail_on: FailOn = typer.Option(
        None, "--fail-on", help="lowest severity that makes the exit code 1 (default: the reports' own)"
    ),
    verbose: bool = VERBOSE,
    root: Path = SOURCE_ROOT,
    html: Path = HTML,
) -> None:
    """Merge JSON reports (each rank's, under torchrun or srun) into one: findings once each, with the ranks that
    saw them; the exit code is the combined verdict."""
    from dataclasses import replace

    from gradcheck.cli import report_page
    from gradcheck.cli.output import check_writable, error_line, note_line
    from gradcheck.engine.combine import combine_reports
    from gradcheck.model.exit_codes import combine as combined

    try:
        check_supported("combine", fmt)
        check_writable(output, inputs=list(reports or ()))
        rooted = source_root(root)
        html = report_page.checked(html, output, list(reports or ()))
        report = replace(combine_reports(list(reports or ()), fail_on), source_root=rooted)
    except UsageError as exc:
        raise usage_exit("combine", exc, fmt, output) from None
    deliver(report, fmt, output, verbose=verbose)
    if report.error:
        error_line(report.error)
    failed = report_page.write(html, report, (), note_line) if html is not None else None
    raise typer.Exit(int(combined([report.exit_code, failed]) if failed is not None else report.exit_code))
