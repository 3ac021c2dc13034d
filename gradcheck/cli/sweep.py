"""`gradcheck sweep SPEC --set KEY=V1,V2,...`: the finite-difference error as one option varies."""

from __future__ import annotations

from pathlib import Path

import typer

from gradcheck.cli.output import console, error_line, fail, stdout_to_stderr
from gradcheck.cli.run import DEVICE_HELP
from gradcheck.formats import OutputFormat
from gradcheck.model.errors import UsageError
from gradcheck.model.exit_codes import ExitCode


def sweep(
    spec: str = typer.Argument(..., metavar="SPEC", help="scenario to sweep"),
    settings: list[str] = typer.Option(None, "--set", metavar="KEY=VALUE", help="one KEY=V1,V2,... is swept"),
    device: str = typer.Option(None, "--device", help=DEVICE_HELP),
    fault: str = typer.Option(None, "--fault", help="sweep a fault variant"),
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table or json"),
    plot_file: Path = typer.Option(
        None, "--plot", help="write a PNG of FD error vs the swept value (needs matplotlib)"
    ),
    debug: bool = typer.Option(False, "--debug", help="show tracebacks"),
) -> None:
    """Finite-difference error of SPEC for each value of one option (e.g. --set steps=10,100,300,600)."""
    import json

    from gradcheck.engine import sweep as sweeping
    from gradcheck.model.options import parse_settings

    try:
        parsed = parse_settings(settings or [])
        with stdout_to_stderr():
            key, rows, used_device, stopped = sweeping.run_sweep(spec, parsed, device, fault)
        if plot_file is not None and rows:
            sweeping.plot(str(plot_file), spec, key, {spec + (f" {fault}" if fault else ""): rows})
    except UsageError as exc:
        if fmt == OutputFormat.json:  # stdout is still one JSON object
            typer.echo(json.dumps({"schema": "gradcheck-sweep/1", "scenario": spec, "rows": [], "error": str(exc)}))
        raise fail(exc) from None
    failed = [r for r in rows if r.severity == "failed"]
    for detail in dict.fromkeys(r.detail for r in failed):  # the same error for every value is said once
        error_line(detail)
    if stopped is not None:
        error_line(f"interrupted by {stopped.what}; {len(rows)} value(s) finished and are reported")
    if fmt == OutputFormat.json:
        payload = {
            "schema": "gradcheck-sweep/1",
            "scenario": spec,
            "fault": fault,
            "device": used_device,
            "option": key,
            "fixed": {k: v for k, v in parsed.items() if k != key},
            "rows": [r.to_dict() for r in rows],
        } | ({"error": f"interrupted by {stopped.what}"} if stopped is not None else {})
        typer.echo(json.dumps(payload, indent=2))
    else:
        from rich.table import Table

        table = Table(box=None, header_style="bold", pad_edge=False, title=f"gradcheck sweep {spec} over {key}")
        table.add_column(key, justify="right")
        table.add_column("FD rel. error", justify="right")
        table.add_column("verdict")
        table.add_column("seconds", justify="right")
        for r in rows:
            error = f"{r.error:.3g}" if r.error is not None else "—"
            table.add_row(r.value, error, r.severity, f"{r.seconds:.1f}")
        console().print(table)
    code = stopped.exit_code if stopped is not None else ExitCode.SCENARIO_ERROR if failed else ExitCode.OK
    raise typer.Exit(int(code))
