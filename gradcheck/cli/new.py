"""`gradcheck new NAME`: write a scenario file that implements the contract, ready to edit."""

from __future__ import annotations

from pathlib import Path

import typer

from gradcheck.cli.output import fail
from gradcheck.model.errors import UsageError


def new(
    name: str = typer.Argument(..., help="scenario name; writes NAME.py in the current directory"),
    force: bool = typer.Option(False, "--force", help="overwrite an existing file"),
) -> None:
    """Write a scenario file implementing the contract, ready to edit; `gradcheck run NAME.py` runs it."""
    from gradcheck.scenario.scaffold import write_scenario

    try:
        path = write_scenario(name, Path.cwd(), force)
    except UsageError as exc:
        raise fail(exc) from None
    typer.echo(f"wrote {path}; run it with: gradcheck run {path.name}")
