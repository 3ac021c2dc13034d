"""`gradcheck list`: built-in and installed scenarios with their faults, read without importing Warp."""

from __future__ import annotations

from pathlib import Path

from gradcheck.cli.reporting import OUTPUT, deliver, format_option, usage_exit
from gradcheck.formats import OutputFormat, check_supported
from gradcheck.model.errors import UsageError


def list_scenarios(fmt: OutputFormat = format_option("list"), output: Path = OUTPUT) -> None:
    """List built-in and installed scenarios with their faults (imports no Warp)."""
    from gradcheck.cli.output import check_writable
    from gradcheck.model.documents import ScenarioListDoc
    from gradcheck.scenario import catalog

    try:
        check_supported("list", fmt)
        check_writable(output)
    except UsageError as exc:
        raise usage_exit("list", exc, fmt, output) from None
    deliver(ScenarioListDoc(tuple(i.to_dict() for i in catalog.all_infos())), fmt, output)
