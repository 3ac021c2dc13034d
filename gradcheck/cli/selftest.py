"""`gradcheck selftest`: every built-in fault caught by its check, every clean variant silent."""

from __future__ import annotations

import typer

from gradcheck.cli.output import console, error_line, fail, stdout_to_stderr
from gradcheck.cli.run import DEVICE_HELP
from gradcheck.model.errors import UsageError
from gradcheck.model.exit_codes import ExitCode


def selftest(
    device: str = typer.Option(None, "--device", help=DEVICE_HELP),
    passes: int = typer.Option(3, "--passes", help="passes per variant"),
) -> None:
    """Run every built-in fault and clean variant: each fault must be caught, each clean variant silent."""
    from rich.table import Table

    from gradcheck.cli.progress import progress_bars
    from gradcheck.engine.interrupts import Interrupted
    from gradcheck.engine.selftest import run_selftest

    try:
        with stdout_to_stderr(), progress_bars(False) as bars:
            outcomes = run_selftest(device, passes, bars and bars.scenarios)
    except UsageError as exc:
        raise fail(exc) from None
    except Interrupted as exc:  # the cases that ran are not a verdict on the matrix: say so, exit 130/143
        error_line(f"interrupted by {exc.what}; the selftest did not finish")
        raise typer.Exit(int(exc.exit_code)) from None
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
    console().print(table)
    bad = [o for o in outcomes if not o.ok]
    skipped = sum(1 for o in outcomes if o.skipped)
    typer.echo(f"{len(outcomes) - len(bad) - skipped} passed, {len(bad)} failed, {skipped} skipped")
    raise typer.Exit(int(ExitCode.FINDINGS if bad else ExitCode.OK))
