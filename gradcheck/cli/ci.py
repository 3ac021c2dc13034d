"""`gradcheck ci`: the configured scenarios ([tool.gradcheck] in pyproject.toml), each isolated, for CI.

Results come back as a Report (``engine.ci``); baselines mark its findings, JUnit renders it, and the
exit code is the Report's, as for ``gradcheck run``.
"""

from __future__ import annotations

from pathlib import Path

import typer

from gradcheck.cli.output import check_writable, error_line, fail, input_files, stdout_to_stderr, write_atomically
from gradcheck.cli.run import DEVICE_HELP
from gradcheck.formats import OutputFormat
from gradcheck.model.errors import UsageError
from gradcheck.model.exit_codes import ExitCode
from gradcheck.model.options import FailOn


def ci(
    device: str = typer.Option(None, "--device", help=DEVICE_HELP),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table or json"),
    junit: Path = typer.Option(None, "--junit", help="also write a JUnit XML report to FILE"),
    baseline: Path = typer.Option(None, "--baseline", help="accept the findings listed in FILE"),
    update_baseline: bool = typer.Option(False, "--update-baseline", help="write the current findings to --baseline"),
    timeout: float = typer.Option(600.0, "--timeout", help="seconds per scenario before it is stopped"),
    shard_spec: str = typer.Option(None, "--shard", metavar="I/N", help="run the I-th of N shards"),
    passes: int = typer.Option(None, "--passes", help="override \\[tool.gradcheck] passes"),
    fail_on: FailOn = typer.Option(None, "--fail-on", help="override \\[tool.gradcheck] fail-on"),
) -> None:
    """Run the configured scenarios (\\[tool.gradcheck] in pyproject.toml), each isolated, for CI."""
    from gradcheck.cli.progress import progress_bars
    from gradcheck.engine import ci as ci_run
    from gradcheck.model.baseline import Baseline
    from gradcheck.model.options import RunOptions

    try:
        config = ci_run.load_config(Path.cwd())
        ci_run.check_specs(config.entries, config.source)
        entries = ci_run.shard(config.entries, shard_spec)
        options = RunOptions(
            device=device,
            passes=config.passes if passes is None else passes,
            fail_on=fail_on or config.fail_on,
            timeout=timeout,
        )
        accepted = _baseline(baseline, update_baseline)
        inputs = input_files([e.spec for e in config.entries]) + [Path(config.source)]
        check_writable(junit, "--junit", inputs + ([baseline] if baseline is not None else []))
        check_writable(baseline if update_baseline else None, "--baseline", inputs)
    except UsageError as exc:
        if fmt == OutputFormat.json:  # stdout is still one JSON object
            typer.echo(_json(_usage_payload(str(exc))), nl=False)
        raise fail(exc) from None

    with stdout_to_stderr(), progress_bars(False, len(entries)) as bars:

        def on_result(result, done: int, total: int) -> None:
            typer.echo(f"gradcheck ci: [{done}/{total}] {result.label}: {result.status}", err=True)
            if result.error:
                error_line(result.error)
            if bars is not None:
                bars.scenarios(result.label, done, total)

        try:
            report = ci_run.run_entries(entries, options, on_result, source=config.source)
        except UsageError as exc:
            if fmt == OutputFormat.json:
                typer.echo(_json(_usage_payload(str(exc), config.source)), nl=False)
            raise fail(exc) from None
    if report.error:  # interrupted: what finished is still reported below
        error_line(report.error)
    if update_baseline:  # what fails now is accepted from now on: only a scenario that could not run fails
        accepted = Baseline.of(report)
        write_atomically(baseline, _json(accepted.to_dict()), "--baseline")
    if accepted is not None:
        report = accepted.apply(report)
    if junit is not None:
        from gradcheck.checks import BY_NAME
        from gradcheck.formats.junit import render as junit_xml

        write_atomically(junit, junit_xml(report, list(BY_NAME)), "--junit")
    typer.echo(_json(_payload(report, config.source)) if fmt == OutputFormat.json else _summary(report), nl=False)
    raise typer.Exit(int(report.exit_code))


def _summary(report) -> str:
    """One line per configured scenario, then the totals."""
    lines = []
    for r in report.scenarios:
        bad = r.failing(report.fail_on)
        accepted_count = sum(1 for f in r.findings if f.baselined)
        detail = r.error or (", ".join(sorted({f.check for f in bad})) or "ok")
        lines.append(f"{r.label}: {detail}" + (f" ({accepted_count} baselined)" if accepted_count else ""))
    failing = sum(1 for r in report.scenarios if r.failing(report.fail_on))
    errors = sum(1 for r in report.scenarios if r.error)
    lines.append(
        f"{len(report.scenarios)} scenario(s), {failing} failing, {errors} error(s) — exit {int(report.exit_code)}"
    )
    return "\n".join(lines) + "\n"


def _baseline(baseline: Path | None, update: bool):
    """The baseline to apply (None: none, or one about to be written), or the usage error of a wrong one."""
    from gradcheck.model.baseline import Baseline

    if update and baseline is None:
        raise UsageError("--update-baseline needs --baseline FILE to write to")
    if baseline is not None and not update and not baseline.is_file():
        raise UsageError(f"--baseline {str(baseline)!r} does not exist; create it with --update-baseline")
    return Baseline.load(baseline) if baseline is not None and not update else None


def _usage_payload(message: str, source: str | None = None) -> dict:
    return {
        "schema": "gradcheck-ci/1",
        "config": source,
        "fail_on": None,
        "scenarios": [],
        "error": message,
        "exit_code": int(ExitCode.USAGE),
    }


def _payload(report, source: str) -> dict:
    """The ci JSON: each scenario as in ``gradcheck run``'s report, plus its label and environment."""
    environment = dict(report.environment)
    return {
        "schema": "gradcheck-ci/1",
        "config": source,
        "fail_on": report.fail_on.label,
        "scenarios": [r.to_dict() | {"environment": environment} for r in report.scenarios],
        "exit_code": int(report.exit_code),
    } | ({"error": report.error} if report.error else {})


def _json(data: dict) -> str:
    import json

    return json.dumps(data, indent=2, allow_nan=False) + "\n"
