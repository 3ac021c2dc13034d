"""The command line: `gradcheck run`, `gradcheck list`, `gradcheck --version`.

Heavy imports (warp, newton, numpy) happen only inside command bodies, so `--help` and `list`
stay instant. The report goes to stdout (or --output); progress and error lines go to stderr.
"""

from __future__ import annotations

import contextlib
import os
import sys
from enum import Enum
from pathlib import Path

import typer

from gradcheck import __version__
from gradcheck.errors import UsageError
from gradcheck.exit_codes import ExitCode
from gradcheck.formats import OutputFormat

app = typer.Typer(
    name="gradcheck",
    help="Gradient diagnostics for NVIDIA Warp and Newton programs.",
    pretty_exceptions_show_locals=False,  # locals would dump arrays into CI logs
    no_args_is_help=True,
    add_completion=False,
)


class FailOn(str, Enum):
    error = "error"
    warning = "warning"


class FDMode(str, Enum):
    fast = "fast"
    elements = "elements"
    off = "off"


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gradcheck {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    """Gradient diagnostics for NVIDIA Warp and Newton programs."""


@app.command()
def run(
    specs: list[str] = typer.Argument(..., metavar="SPEC...", help="built-in name, file.py[:Name], pkg.mod:Name"),
    device: str = typer.Option(None, "--device", help="cpu or cuda:N (default: cuda:0 when available, else cpu)"),
    passes: int = typer.Option(5, "--passes", help="forward/backward passes per scenario"),
    fault: str = typer.Option(None, "--fault", help="run a fault variant (see `gradcheck list`)"),
    settings: list[str] = typer.Option(None, "--set", metavar="KEY=VALUE", help="scenario option; repeatable"),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="report format"),
    output: Path = typer.Option(None, "--output", help="write the report to FILE instead of stdout"),
    fail_on: FailOn = typer.Option(FailOn.error, "--fail-on", help="lowest severity that makes the exit code 1"),
    clip_norm: float = typer.Option(
        None, "--clip-norm", help="clip the params' gradients to this global norm after each pass; show both norms"
    ),
    max_norm: float = typer.Option(1e6, "--max-norm", help="explosion: gradient norm above this is an error"),
    trace_nonfinite: bool = typer.Option(
        False, "--trace-nonfinite", help="on NaN/Inf, re-run with wp.config.verify_fp and name the first bad operation"
    ),
    fd: FDMode = typer.Option(
        FDMode.fast, "--fd", help="finite-difference check: directional (fast), per element, off"
    ),
    fd_warn: float = typer.Option(1e-2, "--fd-warn", help="fd-mismatch: relative error from which it is a warning"),
    fd_error: float = typer.Option(1e-1, "--fd-error", help="fd-mismatch: relative error from which it is an error"),
    replay: bool = typer.Option(True, "--replay/--no-replay", help="write-after-read and reentrancy probe"),
    timeout: float = typer.Option(
        None,
        "--timeout",
        help="stop a scenario after SECONDS and report it as an error (runs them in a worker process)",
    ),
    quiet: bool = typer.Option(False, "--quiet", help="no progress on stderr"),
    debug: bool = typer.Option(False, "--debug", help="show tracebacks"),
) -> None:
    """Run scenarios' forward/backward passes and check their gradients."""
    from gradcheck import pipeline
    from gradcheck.check_options import CheckOptions
    from gradcheck.findings import Severity
    from gradcheck.finite_diff import FDOptions
    from gradcheck.progress import progress_bars

    report = None
    try:
        options = pipeline.RunOptions(
            device=device,
            passes=passes,
            fault=fault,
            settings=parse_settings(settings or []),
            fail_on=Severity.parse(fail_on.value),
            debug=debug,
            clip_norm=clip_norm,
            checks=CheckOptions(max_norm=max_norm),
            trace_nonfinite=trace_nonfinite,
            fd=FDOptions(mode=fd.value, warn=fd_warn, error=fd_error),
            replay=replay,
            timeout=timeout,
        )
        _check_writable(output)
        with _stdout_to_stderr(), progress_bars(quiet, len(specs)) as bars:
            report = pipeline.run(specs, options, bars and bars.passes, bars and bars.scenarios)
    except UsageError as exc:
        report = _usage_report(str(exc), fail_on.value)
    for result in report.scenarios:
        if result.error:
            typer.echo(f"gradcheck: error: {result.error}", err=True)
            if debug and result.traceback:
                typer.echo(result.traceback, err=True)
    if report.error:
        typer.echo(f"gradcheck: error: {report.error}", err=True)
    _emit(report, fmt, output)
    raise typer.Exit(int(report.exit_code))


@app.command()
def sweep(
    spec: str = typer.Argument(..., metavar="SPEC", help="scenario to sweep"),
    settings: list[str] = typer.Option(None, "--set", metavar="KEY=VALUE", help="one KEY=V1,V2,... is swept"),
    device: str = typer.Option(None, "--device", help="cpu or cuda:N (default: cuda:0 when available, else cpu)"),
    fault: str = typer.Option(None, "--fault", help="sweep a fault variant"),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table or json"),
    plot_file: Path = typer.Option(
        None, "--plot", help="write a PNG of FD error vs the swept value (needs matplotlib)"
    ),
    debug: bool = typer.Option(False, "--debug", help="show tracebacks"),
) -> None:
    """Finite-difference error of SPEC for each value of one option (e.g. --set steps=10,100,300,600)."""
    import json

    from gradcheck import sweep as sweeping

    try:
        parsed = parse_settings(settings or [])
        with _stdout_to_stderr():
            key, rows, used_device = sweeping.run_sweep(spec, parsed, device, fault)
        if plot_file is not None:
            sweeping.plot(str(plot_file), spec, key, {spec + (f" {fault}" if fault else ""): rows})
    except UsageError as exc:
        typer.echo(f"gradcheck: error: {exc}", err=True)
        raise typer.Exit(int(ExitCode.USAGE)) from None
    failed = [r for r in rows if r.severity == "failed"]
    for r in failed:
        typer.echo(f"gradcheck: error: {r.detail}", err=True)
    if fmt == OutputFormat.json:
        payload = {
            "schema": "gradcheck-sweep/1",
            "scenario": spec,
            "fault": fault,
            "device": used_device,
            "option": key,
            "fixed": {k: v for k, v in parsed.items() if k != key},
            "rows": [r.to_dict() for r in rows],
        }
        typer.echo(json.dumps(payload, indent=2))
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(box=None, header_style="bold", pad_edge=False, title=f"gradcheck sweep {spec} over {key}")
        table.add_column(key, justify="right")
        table.add_column("FD rel. error", justify="right")
        table.add_column("verdict")
        table.add_column("seconds", justify="right")
        for r in rows:
            error = f"{r.error:.3g}" if r.error is not None else "—"
            table.add_row(r.value, error, r.severity, f"{r.seconds:.1f}")
        Console(highlight=False, width=_width()).print(table)
    code = ExitCode.SCENARIO_ERROR if failed else ExitCode.OK
    raise typer.Exit(int(code))


@app.command()
def explain(
    check: str = typer.Argument(None, metavar="[CHECK]", help="a check name; omit to list them"),
) -> None:
    """What a check means, its common causes, the fix, and an example."""
    from gradcheck.explain import explain as explain_text

    try:
        typer.echo(explain_text(check), nl=False)
    except UsageError as exc:
        typer.echo(f"gradcheck: error: {exc}", err=True)
        raise typer.Exit(int(ExitCode.USAGE)) from None


@app.command()
def ci(
    device: str = typer.Option(None, "--device", help="cpu or cuda:N (default: cuda:0 when available, else cpu)"),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table or json"),
    junit: Path = typer.Option(None, "--junit", help="also write a JUnit XML report to FILE"),
    baseline: Path = typer.Option(None, "--baseline", help="accept the findings listed in FILE"),
    update_baseline: bool = typer.Option(False, "--update-baseline", help="write the current findings to --baseline"),
    timeout: float = typer.Option(600.0, "--timeout", help="seconds per scenario before it is stopped"),
    shard_spec: str = typer.Option(None, "--shard", metavar="I/N", help="run the I-th of N shards"),
    passes: int = typer.Option(None, "--passes", help="override [tool.gradcheck] passes"),
    fail_on: FailOn = typer.Option(None, "--fail-on", help="override [tool.gradcheck] fail-on"),
) -> None:
    """Run the configured scenarios ([tool.gradcheck] in pyproject.toml), each isolated, for CI."""
    import json

    from gradcheck import ci as ci_run

    try:
        config = ci_run.load_config(Path.cwd())
        entries = ci_run.shard(config.entries, shard_spec)
        level = fail_on.value if fail_on else config.fail_on
        count = passes or config.passes
        if update_baseline and baseline is None:
            raise UsageError("--update-baseline needs --baseline FILE to write to")
        if baseline is not None and not update_baseline and not baseline.is_file():
            raise UsageError(f"--baseline {str(baseline)!r} does not exist; create it with --update-baseline")
        _check_writable(junit)
    except UsageError as exc:
        typer.echo(f"gradcheck: error: {exc}", err=True)
        raise typer.Exit(int(ExitCode.USAGE)) from None
    from gradcheck.progress import progress_bars

    results = []
    with progress_bars(False, len(entries)) as bars:
        for i, entry in enumerate(entries, 1):
            result = ci_run.run_entry(entry, count, level, device, timeout)
            results.append(result)
            typer.echo(f"gradcheck ci: [{i}/{len(entries)}] {entry.label}: {result['status']}", err=True)
            if result.get("error"):
                typer.echo(f"gradcheck: error: {result['error']}", err=True)
            if bars is not None:
                bars.scenarios(entry.label, i, len(entries))
    if baseline is not None and update_baseline:
        baseline.write_text(json.dumps(ci_run.baseline_of(results, level), indent=2) + "\n", encoding="utf-8")
    elif baseline is not None:
        ci_run.apply_baseline(results, json.loads(baseline.read_text(encoding="utf-8")))
    errors = [r for r in results if r.get("status") == "error"]
    failing = {r["label"]: ci_run.failing(r, level) for r in results}
    code = ExitCode.SCENARIO_ERROR if errors else ExitCode.FINDINGS if any(failing.values()) else ExitCode.OK
    if update_baseline:
        code = ExitCode.SCENARIO_ERROR if errors else ExitCode.OK
    if junit is not None:
        from gradcheck.explain import checks
        from gradcheck.formats.junit import render as junit_xml

        junit.write_text(junit_xml(results, list(checks()), level), encoding="utf-8")
    if fmt == OutputFormat.json:
        typer.echo(
            json.dumps(
                {
                    "schema": "gradcheck-ci/1",
                    "config": config.source,
                    "fail_on": level,
                    "scenarios": results,
                    "exit_code": int(code),
                },
                indent=2,
            )
        )
    else:
        for r in results:
            bad = failing.get(r["label"], [])
            accepted = sum(1 for f in r.get("findings", []) if f.get("baselined"))
            detail = r.get("error") or (", ".join(sorted({f["check"] for f in bad})) or "ok")
            typer.echo(f"{r['label']}: {detail}" + (f" ({accepted} baselined)" if accepted else ""))
        typer.echo(
            f"{len(results)} scenario(s), {sum(1 for v in failing.values() if v)} failing, "
            f"{len(errors)} error(s) — exit {int(code)}"
        )
    raise typer.Exit(int(code))


@app.command()
def selftest(
    device: str = typer.Option(None, "--device", help="cpu or cuda:N (default: cuda:0 when available, else cpu)"),
    passes: int = typer.Option(3, "--passes", help="passes per variant"),
) -> None:
    """Run every built-in fault and clean variant: each fault must be caught, each clean variant silent."""
    from rich.console import Console
    from rich.table import Table

    from gradcheck.progress import progress_bars
    from gradcheck.selftest import run_selftest

    try:
        with _stdout_to_stderr(), progress_bars(False) as bars:
            outcomes = run_selftest(device, passes, bars and bars.scenarios)
    except UsageError as exc:
        typer.echo(f"gradcheck: error: {exc}", err=True)
        raise typer.Exit(int(ExitCode.USAGE)) from None
    table = Table(box=None, header_style="bold", pad_edge=False, title="gradcheck selftest")
    table.add_column("variant", overflow="fold")
    table.add_column("must fire", overflow="fold")
    table.add_column("fired", overflow="fold")
    table.add_column("result")
    for o in outcomes:
        expected = ", ".join(sorted(o.case.expect)) or "nothing"
        fired = o.skipped or o.error or (", ".join(sorted(o.fired)) or "nothing")
        verdict = "skipped" if o.skipped else "ok" if o.ok else "MISS" if o.case.expect else "FALSE POSITIVE"
        table.add_row(o.case.label, expected, fired, verdict)
    Console(highlight=False, width=_width()).print(table)
    bad = [o for o in outcomes if not o.ok]
    skipped = sum(1 for o in outcomes if o.skipped)
    typer.echo(f"{len(outcomes) - len(bad) - skipped} passed, {len(bad)} failed, {skipped} skipped")
    raise typer.Exit(int(ExitCode.FINDINGS if bad else ExitCode.OK))


@app.command()
def new(
    name: str = typer.Argument(..., help="scenario name; writes NAME.py in the current directory"),
    force: bool = typer.Option(False, "--force", help="overwrite an existing file"),
) -> None:
    """Write a scenario file implementing the contract, ready to edit; `gradcheck run NAME.py` runs it."""
    from gradcheck.scaffold import write_scenario

    try:
        path = write_scenario(name, Path.cwd(), force)
    except UsageError as exc:
        typer.echo(f"gradcheck: error: {exc}", err=True)
        raise typer.Exit(int(ExitCode.USAGE)) from None
    typer.echo(f"wrote {path}; run it with: gradcheck run {path.name}")


@app.command("list")
def list_scenarios(
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table or json"),
) -> None:
    """List built-in and installed scenarios with their faults (imports no Warp)."""
    import json

    from gradcheck import catalog

    infos = catalog.all_infos()
    if fmt == OutputFormat.json:
        typer.echo(json.dumps([i.to_dict() for i in infos], indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("scenario", no_wrap=True)
    table.add_column("description / faults", overflow="fold")
    table.add_column("source", no_wrap=True)
    for info in infos:
        faults = "".join(f"\n  --fault {k}: {v}" for k, v in info.faults.items())
        table.add_row(info.name, info.description + faults, info.source)
    Console(highlight=False).print(table)


def parse_settings(items: list[str]) -> dict[str, str]:
    settings: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"malformed --set {item!r}; write --set KEY=VALUE (e.g. --set steps=100)")
        settings[key.strip()] = value
    return settings


def _check_writable(output: Path | None) -> None:
    """Fail before the run, not after it, when the report could not be written."""
    if output is None:
        return
    parent = output.expanduser().resolve().parent
    if output.is_dir():
        raise UsageError(f"--output {str(output)!r} is a directory; give a file path")
    if not parent.is_dir() or not os.access(parent, os.W_OK) or (output.exists() and not os.access(output, os.W_OK)):
        raise UsageError(f"cannot write --output {str(output)!r}; choose a writable path")


def _emit(report, fmt: OutputFormat, output: Path | None) -> None:
    from gradcheck.formats import render

    if output is not None:
        text = render(report, fmt, color=False, width=100)
        try:
            output.expanduser().write_text(text, encoding="utf-8")
        except OSError as exc:
            typer.echo(f"gradcheck: error: cannot write --output {str(output)!r}: {exc.strerror}", err=True)
            raise typer.Exit(int(ExitCode.USAGE)) from None
        return
    sys.stdout.write(render(report, fmt, color=_color(), width=_width()))
    sys.stdout.flush()


def _color() -> bool:
    """Colour only on a terminal, and never with NO_COLOR set (https://no-color.org: any value)."""
    return sys.stdout.isatty() and "NO_COLOR" not in os.environ


def _width() -> int:
    """The terminal's width (capped at 140 so rows stay scannable); COLUMNS when piped; else 100."""
    if sys.stdout.isatty():
        return max(40, min(os.get_terminal_size().columns, 140))
    try:
        return max(40, int(os.environ["COLUMNS"]))
    except (KeyError, ValueError):
        return 100


def _usage_report(message: str, fail_on: str):
    from gradcheck.environment import describe
    from gradcheck.findings import Severity
    from gradcheck.report import Report

    return Report(
        environment=describe(None),
        scenarios=(),
        fail_on=Severity.parse(fail_on),
        error=message,
        error_code=ExitCode.USAGE,
    )


@contextlib.contextmanager
def _stdout_to_stderr():
    """Anything printed while scenarios run (Warp, Newton, user code, native printf) goes to stderr,
    so stdout carries only the report and JSON on stdout stays parseable."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no real fd 1 (embedded use): Python-level redirect only
        with contextlib.redirect_stdout(sys.stderr):
            yield
        return
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def main() -> None:
    app(prog_name="gradcheck")


if __name__ == "__main__":
    main()
