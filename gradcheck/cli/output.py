"""What every command shares about output: where the report goes, how wide, in colour or not, and the
one-line error on stderr.

The report goes to stdout (or ``--output``); progress and error lines go to stderr, and anything a
scenario prints while it runs is sent to stderr too, so ``--format json`` stdout stays parseable.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import typer

from gradcheck.model.errors import UsageError
from gradcheck.model.exit_codes import ExitCode


def fail(exc: UsageError) -> typer.Exit:
    """Print ``gradcheck: error: …`` and return the Exit to raise (exit 2)."""
    error_line(str(exc))
    return typer.Exit(int(ExitCode.USAGE))


def error_line(message: str) -> None:
    typer.echo(f"gradcheck: error: {message}", err=True)


def check_writable(output: Path | None, flag: str = "--output") -> None:
    """Fail before the run, not after it, when a report could not be written."""
    if output is None:
        return
    parent = output.expanduser().resolve().parent
    if output.is_dir():
        raise UsageError(f"{flag} {str(output)!r} is a directory; give a file path")
    if not parent.is_dir() or not os.access(parent, os.W_OK) or (output.exists() and not os.access(output, os.W_OK)):
        raise UsageError(f"cannot write {flag} {str(output)!r}; choose a writable path")


def emit(report, fmt, output: Path | None) -> None:
    """The report in ``fmt`` to ``output`` (plain, 100 columns) or stdout (terminal width and colour)."""
    from gradcheck.formats import render

    if output is not None:
        text = render(report, fmt, color=False, width=100)
        try:
            output.expanduser().write_text(text, encoding="utf-8")
        except OSError as exc:
            error_line(f"cannot write --output {str(output)!r}: {exc.strerror}")
            raise typer.Exit(int(ExitCode.USAGE)) from None
        return
    sys.stdout.write(render(report, fmt, color=color(), width=width()))
    sys.stdout.flush()


def color() -> bool:
    """Colour only on a terminal, and never with NO_COLOR set (https://no-color.org: any value)."""
    return sys.stdout.isatty() and "NO_COLOR" not in os.environ


def width() -> int:
    """The terminal's width (capped at 140 so rows stay scannable); COLUMNS when piped; else 100."""
    if sys.stdout.isatty():
        return max(40, min(os.get_terminal_size().columns, 140))
    try:
        return max(40, int(os.environ["COLUMNS"]))
    except (KeyError, ValueError):
        return 100


def console():
    from rich.console import Console

    return Console(highlight=False, width=width())


@contextlib.contextmanager
def stdout_to_stderr():
    """Anything printed while scenarios run (Warp, Newton, user code, native printf) goes to stderr,
    so stdout carries only the report and JSON on stdout stays parseable."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no real fd 1 (embedded use): Python-level redirect only
        with contextlib.redirect_stdout(sys.stderr):
            yield
        return
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
