"""`gradcheck exec script.py [ARGS...]` / `gradcheck exec -m module [ARGS...]`: audit an unmodified program.

Like ``coverage run`` or compute-sanitizer: the program runs exactly as it would under ``python`` (engine.hosting:
its argv, sys.path, ``__main__``, signals, output and traceback are python's), and gradcheck is loud only about
its findings: the report comes after everything the program wrote, on the stdout gradcheck started with and on a
line of its own (or goes to --output, refreshed as the run goes), then gradcheck's one error line on stderr when
there is something to say. Everything after the script (or the module) is the program's, not gradcheck's:
``gradcheck exec -m newton.examples diffsim_ball --viewer null --device cpu``.

This module is the command's Typer declaration (its options, its ``--help``); the work is ``exec_run.run_exec``,
which ``exec_fast`` calls directly for a plain command line, without Typer.
"""

from __future__ import annotations

from pathlib import Path

import typer

from gradcheck.cli.exec_run import _report, run_exec  # noqa: F401 - _report: tests judge an audit as exec does
from gradcheck.cli.reporting import HTML, IGNORE, SELECT, SOURCE_ROOT, VERBOSE, format_option
from gradcheck.cli.run import GRAPH, MAX_NORM
from gradcheck.formats import OutputFormat
from gradcheck.model.options import AUDIT_EVERY, AUDIT_FIRST, FailOn

SETTINGS = {"allow_interspersed_args": False, "ignore_unknown_options": True, "allow_extra_args": True}


def exec_program(
    program: list[str] = typer.Argument(None, metavar="SCRIPT.py [ARGS...]", help="the program and its arguments"),
    module: str = typer.Option(None, "-m", metavar="MODULE", help="run a module, as python -m MODULE"),
    fmt: OutputFormat = format_option("exec"),
    output: Path = typer.Option(
        None,
        "--output",
        metavar="FILE",
        help="write the report to FILE instead of stdout (refreshed at most once a second); under torchrun or srun "
        "one file per rank: {rank} in FILE, or a .rank<R> suffix",
    ),
    fail_on: FailOn = typer.Option(FailOn.error, "--fail-on", help="lowest severity that makes the exit code 1"),
    select: list[str] = SELECT,
    ignore: list[str] = IGNORE,
    verbose: bool = VERBOSE,
    keep_going: bool = typer.Option(
        False, "--keep-going", help="skip a backward that would write through a dangling pointer, instead of stopping"
    ),
    max_norm: float = MAX_NORM,
    debug: bool = typer.Option(False, "--debug", help="also put the program's traceback in the report"),
    audit_first: int = typer.Option(
        AUDIT_FIRST, "--audit-first", min=0, metavar="N", help="audit the program's first N backwards in full"
    ),
    audit_every: int = typer.Option(
        AUDIT_EVERY,
        "--audit-every",
        min=1,
        metavar="N",
        help="after them, audit every Nth backward and the one after it (1: every backward)",
    ),  # fmt: skip
    blame: bool = typer.Option(
        False, "--blame", help="test every launch of one backward's tape against its own finite differences"
    ),
    blame_at: int = typer.Option(
        None, "--blame-at", min=1, metavar="N", help="the backward --blame tests (default 1; implies --blame)"
    ),
    adjoint_test: bool = typer.Option(
        True,
        "--adjoint-test/--no-adjoint-test",
        help="test each kernel's adjoint on the values of its first launch (against its own finite differences)",
    ),
    graph: Path = GRAPH,
    root: Path = SOURCE_ROOT,
    html: Path = HTML,
) -> None:
    """Run an unmodified Warp program and audit its tape.backward and tape.zero calls (a long run: the first ones
    in full, then sampled pairs; --audit-every 1 for all)."""
    raise typer.Exit(
        run_exec(
            program,
            module,
            fmt,
            output,
            fail_on,
            select,
            ignore,
            verbose,
            keep_going,
            max_norm,
            debug,
            audit_first,
            audit_every,
            blame,
            blame_at,
            adjoint_test,
            graph,
            root,
            html,
        )  # fmt: skip
    )
