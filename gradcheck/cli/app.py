"""The Typer app: one registry line per command, each command in its own module.

Command modules import only Typer and gradcheck's light modules at the top; Warp, Newton and numpy
are imported inside command bodies, so ``--help`` and ``list`` stay instant. The console script is cli.console's
``main``, which imports this module only for a command line that needs Typer.
"""

from __future__ import annotations

import typer

from gradcheck.cli import blame, ci, combine, doctor, exec_program, explain, list_scenarios, new, run, selftest, sweep
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
    ("combine", combine.combine),
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
