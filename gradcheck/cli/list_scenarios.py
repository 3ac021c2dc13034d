"""`gradcheck list`: built-in and installed scenarios with their faults, read without importing Warp."""

from __future__ import annotations

import typer

from gradcheck.formats import OutputFormat


def list_scenarios(
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table or json"),
) -> None:
    """List built-in and installed scenarios with their faults (imports no Warp)."""
    import json

    from gradcheck.scenario import catalog

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
