"""`gradcheck new NAME`: write a scenario file that implements the contract, ready to edit."""

from __future__ import annotations

from pathlib import Path

import typer

from gradcheck.cli.reporting import deliver, format_option, usage_exit
from gradcheck.formats import OutputFormat, check_supported
from gradcheck.model.errors import UsageError


def new(
    name: str = typer.Argument(..., help="scenario name; writes NAME.py in the current directory"),
    force: bool = typer.Option(False, "--force", help="overwrite an existing file"),
    fmt: OutputFormat = format_option("new"),
) -> None:
    """Write a scenario file implementing the contract, ready to edit; `gradcheck run NAME.py` runs it."""
    from gradcheck.model.documents import NewDoc
    from gradcheck.scenario.scaffold import write_scenario

    try:
        check_supported("new", fmt)
        path = write_scenario(name, Path.cwd(), force)
    except UsageError as exc:
        raise usage_exit("new", exc, fmt) from None
    deliver(NewDoc(str(path)), fmt, None)
