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


def usage_failure(message: str, args: list[str], code: int = int(ExitCode.USAGE)) -> int:
    """A command line the parser rejected: one error line naming the way to help; with ``--format json``, the
    usage error as the report's JSON on stdout too. Returns the exit code."""
    command = next((a for a in args if not a.startswith("-")), None)
    where = f"gradcheck {command} --help" if command else "gradcheck --help"
    error_line(f"{message.strip().rstrip('.')}; see `{where}`")
    if _requested_format(args) == "json":
        from gradcheck.formats import OutputFormat
        from gradcheck.model.options import FailOn

        emit(usage_report(message.strip(), FailOn.error), OutputFormat.json, None)
    return code


def _requested_format(args: list[str]) -> str | None:
    for i, arg in enumerate(args):
        if arg == "--format" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--format="):
            return arg.split("=", 1)[1]
    return None


def usage_report(message: str, fail_on):
    """A report that carries only the usage error, so ``--format json`` stdout is still one JSON object."""
    from gradcheck.engine.environment import describe
    from gradcheck.model.options import severity
    from gradcheck.model.report import Report

    return Report(
        environment=describe(None), scenarios=(), fail_on=severity(fail_on), error=message, error_code=ExitCode.USAGE
    )


def check_writable(output: Path | None, flag: str = "--output", inputs=()) -> None:
    """Fail before the run, not after it, when a report could not be written, or would overwrite one of the
    run's own inputs (the scenario file, the baseline, the config)."""
    if output is None:
        return
    parent = output.expanduser().resolve().parent
    if output.is_dir():
        raise UsageError(f"{flag} {str(output)!r} is a directory; give a file path")
    if not parent.is_dir() or not os.access(parent, os.W_OK) or (output.exists() and not os.access(output, os.W_OK)):
        raise UsageError(f"cannot write {flag} {str(output)!r}; choose a writable path")
    for source in inputs:
        if output.exists() and source.exists() and os.path.samefile(output, source):
            raise UsageError(f"{flag} {str(output)!r} is one of this run's inputs; write the report to another file")


def input_files(specs) -> list[Path]:
    """The files a run reads that a report must never overwrite: scenario files named by path."""
    found = []
    for spec in specs:
        path = Path(spec)
        if not path.is_file() and ":" in spec:
            path = Path(spec.rsplit(":", 1)[0])
        if path.is_file():
            found.append(path)
    return found


def write_atomically(path: Path, text: str, flag: str = "--output") -> None:
    """Write ``text`` to a temporary file beside ``path`` and rename it over ``path``: a reader never sees a
    half-written report, and a write that fails (disk full) leaves the previous file as it was. One error line
    and exit 2 when it cannot be written."""
    import tempfile

    path = path.expanduser()
    temporary = None
    try:
        with tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", dir=path.resolve().parent, prefix=f".{path.name}.", suffix=".tmp", delete=False
        ) as handle:
            temporary = handle.name
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if path.exists():
            os.chmod(temporary, path.stat().st_mode & 0o7777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, path)
    except OSError as exc:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        error_line(f"cannot write {flag} {str(path)!r}: {exc.strerror or exc}")
        raise typer.Exit(int(ExitCode.USAGE)) from None


def emit(report, fmt, output: Path | None) -> None:
    """The report in ``fmt`` to ``output`` (plain, 100 columns) or stdout (terminal width and colour)."""
    from gradcheck.formats import render

    if output is not None:
        write_atomically(output, render(report, fmt, color=False, width=100))
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
