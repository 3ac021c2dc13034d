"""The Typer app: one registry line per command, each command in its own module.

Command modules import only Typer and gradcheck's light modules at the top; Warp, Newton and numpy
are imported inside command bodies, so ``--help`` and ``list`` stay instant.
"""

from __future__ import annotations

import typer

from gradcheck.cli import blame, ci, doctor, exec_program, explain, list_scenarios, new, run, selftest, sweep
from gradcheck.version import __version__

app = typer.Typer(
    name="gradcheck",
    help="Gradient diagnostics for NVIDIA Warp and Newton programs.",
    pretty_exceptions_show_locals=False,  # locals would dump arrays into CI logs
    no_args_is_help=True,
    add_completion=False,
)

COMMANDS = (
    ("run", run.run),
    ("blame", blame.blame),
    ("exec", exec_program.exec_program),
    ("sweep", sweep.sweep),
    ("explain", explain.explain),
    ("ci", ci.ci),
    ("selftest", selftest.selftest),
    ("new", new.new),
    ("doctor", doctor.doctor),
    ("list", list_scenarios.list_scenarios),
)
CONTEXT = {"exec": exec_program.SETTINGS}  # everything after the program is the program's
for _name, _command in COMMANDS:
    app.command(_name, context_settings=CONTEXT.get(_name))(_command)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gradcheck {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    """Gradient diagnostics for NVIDIA Warp and Newton programs."""


def main() -> None:
    """The console script. Typer's own handling of a bad command line prints a panel on stderr and nothing on
    stdout; here it is one ``gradcheck: error: …`` line and exit 2, and with ``--format json`` stdout still carries
    one JSON object (the usage error in ``error``), as for every other usage error."""
    import sys

    from gradcheck.cli.output import error_line
    from gradcheck.cli.reporting import usage_failure
    from gradcheck.model.exit_codes import ExitCode

    args = sys.argv[1:]
    if sys.stdout is None and not any(
        a == "--output" or a.startswith("--output=") for a in args
    ):  # started with stdout closed (>&-): nowhere for the report
        error_line("stdout is closed, so the report could not be written; give --output FILE")
        sys.exit(int(ExitCode.USAGE))
    try:
        code = None
        if args[:1] == ["exec"]:  # the program's startup is gradcheck's too: Typer's parse only when needed
            from gradcheck.cli.exec_fast import run_fast

            code = run_fast(args[1:])
        if code is None:
            code = app(prog_name="gradcheck", args=args, standalone_mode=False)
    except BrokenPipeError:  # a reader that went away outside deliver() (help text | head): no traceback
        from gradcheck.cli.reporting import discard_stdout

        discard_stdout()
        code = 1
    except Exception as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # `gradcheck` alone: the help, as Typer shows it
            exc.show()
            code = int(ExitCode.USAGE)
        elif callable(getattr(exc, "format_message", None)) and isinstance(getattr(exc, "exit_code", None), int):
            code = usage_failure(exc.format_message(), args, exc.exit_code)  # Click's UsageError and friends
        else:
            raise
    sys.exit(code or 0)
