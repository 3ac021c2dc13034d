"""`gradcheck sweep SPEC --set KEY=V1,V2,...`: the finite-difference error as one option varies."""

from __future__ import annotations

from pathlib import Path

import typer

from gradcheck.cli.output import check_writable, error_line, stdout_to_stderr
from gradcheck.cli.reporting import OUTPUT, deliver, format_option, usage_exit
from gradcheck.cli.run import DEVICE_HELP
from gradcheck.formats import OutputFormat, check_supported
from gradcheck.model.errors import UsageError
from gradcheck.model.exit_codes import ExitCode


def sweep(
    spec: str = typer.Argument(..., metavar="SPEC", help="scenario to sweep"),
    settings: list[str] = typer.Option(None, "--set", metavar="KEY=VALUE", help="one KEY=V1,V2,... is swept"),
    device: str = typer.Option(None, "--device", help=DEVICE_HELP),
    fault: str = typer.Option(None, "--fault", help="sweep a fault variant"),
    fmt: OutputFormat = format_option("sweep"),
    output: Path = OUTPUT,
    plot_file: Path = typer.Option(
        None, "--plot", help="write a PNG of FD error vs the swept value (needs matplotlib)"
    ),
    debug: bool = typer.Option(False, "--debug", help="show tracebacks"),
) -> None:
    """Finite-difference error of SPEC for each value of one option (e.g. --set steps=10,100,300,600)."""
    from gradcheck.engine import sweep as sweeping
    from gradcheck.model.documents import SweepDoc
    from gradcheck.model.options import parse_settings

    try:
        check_supported("sweep", fmt)
        check_writable(output)
        check_writable(plot_file, "--plot")
        parsed = parse_settings(settings or [], once=True)
        with stdout_to_stderr():
            key, rows, used_device, stopped = sweeping.run_sweep(spec, parsed, device, fault)
        if plot_file is not None and rows:
            sweeping.plot(str(plot_file), spec, key, {spec + (f" {fault}" if fault else ""): rows})
    except UsageError as exc:
        raise usage_exit("sweep", exc, fmt, output, source=spec) from None
    failed = [r for r in rows if r.severity == "failed"]
    rejected = [r for r in rows if r.severity == "rejected"]  # a value setup() refused: exit 2, the rest kept
    for detail in dict.fromkeys(r.detail for r in rejected + failed):  # the same error for every value: once
        error_line(detail)
    if stopped is not None:
        error_line(f"interrupted by {stopped.what}; {len(rows)} value(s) finished and are reported")
    document = SweepDoc(
        scenario=spec,
        fault=fault,
        device=used_device,
        option=key,
        fixed={k: v for k, v in parsed.items() if k != key},
        rows=tuple(r.to_dict() for r in rows),
        error=f"interrupted by {stopped.what}" if stopped is not None else None,
    )
    deliver(document, fmt, output)
    code = ExitCode.SCENARIO_ERROR if failed else ExitCode.OK
    code = stopped.exit_code if stopped is not None else ExitCode.USAGE if rejected else code
    raise typer.Exit(int(code))
