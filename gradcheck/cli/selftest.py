"""`gradcheck selftest`: the selftest matrix (engine.selftest: the faults and clean variants of cartpole, nested-struct,
rollout and spring-chain), each fault caught by its check, each clean variant silent."""

from __future__ import annotations

from pathlib import Path

import typer

from gradcheck.cli.output import check_writable, error_line, stdout_to_stderr
from gradcheck.cli.reporting import OUTPUT, deliver, format_option, usage_exit
from gradcheck.cli.run import DEVICE_HELP
from gradcheck.formats import OutputFormat, check_supported
from gradcheck.model.errors import UsageError


def selftest(
    device: str = typer.Option(None, "--device", help=DEVICE_HELP),
    passes: int = typer.Option(
        3, "--passes", min=3, help="passes per variant (the leaks show from pass 2 on, vanishing needs 3)"
    ),
    fmt: OutputFormat = format_option("selftest"),
    output: Path = OUTPUT,
) -> None:
    """Run the selftest matrix (cartpole, nested-struct, rollout, spring-chain): each fault caught, each clean silent."""
    from gradcheck.cli.progress import progress_bars
    from gradcheck.engine.interrupts import Interrupted
    from gradcheck.engine.selftest import run_selftest

    try:
        check_supported("selftest", fmt)
        check_writable(output)
        with stdout_to_stderr(), progress_bars(False) as bars:
            outcomes = run_selftest(device, passes, bars and bars.scenarios)
    except UsageError as exc:
        raise usage_exit("selftest", exc, fmt, output) from None
    except Interrupted as exc:  # the cases that ran are not a verdict on the matrix: say so, exit 130/143
        error_line(f"interrupted by {exc.what}; the selftest did not finish")
        raise typer.Exit(int(exc.exit_code)) from None
    document = selftest_document(outcomes, device)
    deliver(document, fmt, output)
    raise typer.Exit(int(document.exit_code))


def selftest_document(outcomes, device: str | None):
    from gradcheck.model.documents import SelftestDoc, SelftestRow

    rows = []
    for o in outcomes:
        if o.skipped:
            result, detail = "skipped", o.skipped
        elif o.error:
            result, detail = "error", o.error
        else:
            result, detail = ("ok" if o.ok else "MISS" if o.case.expect else "FALSE POSITIVE"), None
        rows.append(SelftestRow(o.case.label, tuple(sorted(o.case.expect)), tuple(sorted(o.fired)), result, detail))
    return SelftestDoc(tuple(rows), device)
