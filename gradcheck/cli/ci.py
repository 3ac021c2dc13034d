"""`gradcheck ci`: the configured scenarios ([tool.gradcheck] in pyproject.toml), each isolated, for CI.

Results come back as a Report (``engine.ci``); baselines mark its findings, JUnit renders it, and the
exit code is the Report's, as for ``gradcheck run``.
"""

from __future__ import annotations

from pathlib import Path

import typer

from gradcheck.cli.output import (
    check_writable,
    error_line,
    input_files,
    note_line,
    stdout_to_stderr,
    write_atomically,
)
from gradcheck.cli.reporting import (
    HTML,
    IGNORE,
    OUTPUT,
    SELECT,
    SOURCE_ROOT,
    deliver,
    format_option,
    judged,
    source_root,
    suppressions,
    usage_exit,
)
from gradcheck.cli.run import DEVICE_HELP
from gradcheck.formats import OutputFormat, check_supported
from gradcheck.model.errors import UsageError
from gradcheck.model.exit_codes import combine
from gradcheck.model.options import FailOn


def ci(
    device: str = typer.Option(None, "--device", help=DEVICE_HELP),
    fmt: OutputFormat = format_option("ci"),
    output: Path = OUTPUT,
    junit: Path = typer.Option(None, "--junit", metavar="FILE", help="also write a JUnit XML report to FILE"),
    baseline: Path = typer.Option(None, "--baseline", help="accept the findings listed in FILE"),
    update_baseline: bool = typer.Option(False, "--update-baseline", help="write the current findings to --baseline"),
    select: list[str] = SELECT,
    ignore: list[str] = IGNORE,
    timeout: float = typer.Option(600.0, "--timeout", help="seconds per scenario before it is stopped"),
    shard_spec: str = typer.Option(None, "--shard", metavar="I/N", help="run the I-th of N shards"),
    passes: int = typer.Option(None, "--passes", help="override \\[tool.gradcheck] passes"),
    fail_on: FailOn = typer.Option(None, "--fail-on", help="override \\[tool.gradcheck] fail-on"),
    root: Path = SOURCE_ROOT,
    html: Path = HTML,
) -> None:
    """Run the configured scenarios (\\[tool.gradcheck] in pyproject.toml), each isolated, for CI."""
    from gradcheck.cli import report_page
    from gradcheck.cli.progress import progress_bars
    from gradcheck.engine import ci as ci_run
    from gradcheck.model.baseline import Baseline
    from gradcheck.model.documents import CiDoc
    from gradcheck.model.options import RunOptions
    from gradcheck.model.report import Report

    source = None
    try:
        check_supported("ci", fmt)
        config = ci_run.load_config(Path.cwd())
        source = config.source
        rules = suppressions(select, ignore)
        rooted = source_root(root)
        ci_run.check_specs(config.entries, config.source)
        entries = ci_run.shard(config.entries, shard_spec)
        passes = config.passes if passes is None else passes
        options = RunOptions(device=device, passes=passes, fail_on=fail_on or config.fail_on, timeout=timeout)
        accepted = _baseline(baseline, update_baseline)
        inputs = input_files([e.spec for e in config.entries]) + [Path(config.source)]
        inputs += [baseline] if baseline is not None else []
        check_writable(output, "--output", inputs)
        check_writable(junit, "--junit", inputs)
        _distinct({"--output": output, "--junit": junit, "--baseline": baseline})
        html = report_page.checked(html, output, inputs, {"--junit": junit, "--baseline": baseline})
        check_writable(baseline if update_baseline else None, "--baseline", inputs[:-1] if baseline else inputs)
    except UsageError as exc:
        raise usage_exit("ci", exc, fmt, output, source=source) from None

    with stdout_to_stderr(), progress_bars(False, len(entries)) as bars:

        def on_result(result, done: int, total: int) -> None:
            status = rules.apply(Report(environment={}, scenarios=(result,))).scenarios[0].status  # as reported
            typer.echo(f"gradcheck ci: [{done}/{total}] {result.label}: {status}", err=True)
            if result.error:
                error_line(result.error)
            if bars is not None:
                bars.scenarios(result.label, done, total)

        try:
            report = ci_run.run_entries(entries, options, on_result, source=config.source)
        except UsageError as exc:
            raise usage_exit("ci", exc, fmt, output, source=config.source) from None
    report = judged(report, rules, root=rooted)
    if report.error:  # interrupted: what finished is still reported below
        error_line(report.error)
    if update_baseline:  # what fails now is accepted from now on: only a scenario that could not run fails
        accepted = Baseline.of(report)
        write_atomically(baseline, _json(accepted.to_dict()), "--baseline")
    if accepted is not None:
        report = accepted.apply(report)
    document = CiDoc(report, config.source)
    if junit is not None:
        from gradcheck.formats import render

        write_atomically(junit, render(document, OutputFormat.junit), "--junit")
    deliver(document, fmt, output)
    failed = report_page.write(html, document, (), note_line) if html is not None else None
    raise typer.Exit(int(combine([report.exit_code, failed]) if failed is not None else report.exit_code))


def _distinct(paths: dict) -> None:
    """Two of ci's files naming one path would overwrite each other: one of them would silently be lost."""
    seen: dict = {}
    for flag, path in paths.items():
        if path is None:
            continue
        key = path.expanduser().resolve()
        if key in seen:
            raise UsageError(f"{seen[key]} and {flag} both name {str(path)!r}; give each its own file")
        seen[key] = flag


def _baseline(baseline: Path | None, update: bool):
    """The baseline to apply (None: none, or one about to be written), or the usage error of a wrong one."""
    from gradcheck.model.baseline import Baseline

    if update and baseline is None:
        raise UsageError("--update-baseline needs --baseline FILE to write to")
    if baseline is not None and baseline.is_dir():
        raise UsageError(f"--baseline {str(baseline)!r} is a directory; give the baseline's file")
    if baseline is not None and not update and not baseline.is_file():
        raise UsageError(f"--baseline {str(baseline)!r} does not exist; create it with --update-baseline")
    return Baseline.load(baseline) if baseline is not None and not update else None


def _json(data: dict) -> str:
    import json

    return json.dumps(data, indent=2, allow_nan=False) + "\n"
