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

from gradcheck.model.errors import UsageError
from gradcheck.model.exit_codes import ExitCode


def error_line(message: str) -> None:
    import typer  # here, not at the top: ``gradcheck exec`` starts its program without Typer

    typer.echo(f"gradcheck: error: {message}", err=True)


def note_line(message: str) -> None:
    """``gradcheck: note: …`` on stderr: what a command did beside its report (a picture, a page, one not drawn)."""
    import typer

    typer.echo(f"gradcheck: note: {message}", err=True)


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
    """``write_report_file``, with one error line and exit 2 when the report cannot be written."""
    try:
        write_report_file(path, text)
    except OSError as exc:
        import typer

        error_line(f"cannot write {flag} {str(path)!r}: {exc.strerror or exc}")
        raise typer.Exit(int(ExitCode.USAGE)) from None


def write_report_file(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path`` and rename it over ``path``: a reader never sees a
    half-written report, and a write that fails (disk full) leaves the previous file as it was. A path that exists
    and is no regular file (a device such as /dev/stdout or /dev/full, a FIFO) is written directly: renaming over
    it would replace the device node itself. Raises OSError."""
    import stat
    import tempfile

    path = path.expanduser()
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
        return
    temporary = None
    try:
        with tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", dir=path.resolve().parent, prefix=f".{path.name}.", suffix=".tmp", delete=False
        ) as handle:
            temporary = handle.name
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(temporary, mode & 0o7777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, path.resolve())
    except OSError:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        raise


def is_regular_target(path: Path) -> bool:
    """A path a report can be renamed onto (absent, or a regular file): not a device or FIFO, which get one write."""
    import stat

    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        return True
    except OSError:
        return False


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
    so stdout carries only the report and JSON on stdout stays parseable.

    Started with stdout closed (``>&-``, a report going to ``--output``): fd 1 points at stderr while the
    scenarios run, so native output has somewhere to go and no file the run opens is handed number 1 (where a
    kernel's printf would land in it), and is closed again afterwards, as it was."""
    if sys.stdout is not None:
        sys.stdout.flush()
    try:
        restore = _point_fd1_at_stderr()
    except OSError:  # no real fd 1 or 2 (embedded use): Python-level redirect only
        restore = None
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        if sys.stdout is not None:
            sys.stdout.flush()
        if restore is not None:
            restore()


def _point_fd1_at_stderr():
    """fd 1 onto fd 2; returns what puts it back (closes it again when it was closed). Raises OSError."""
    saved = os.dup(1) if is_open(1) else None
    try:
        os.dup2(2, 1)
    except OSError:
        if saved is not None:
            os.close(saved)
        raise

    def restore() -> None:
        if saved is None:
            os.close(1)
        else:
            os.dup2(saved, 1)
            os.close(saved)

    return restore


def is_open(fd: int) -> bool:
    """Whether file descriptor ``fd`` is open (a program started with ``>&-`` has no stdout)."""
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


class ReportNotWritten(Exception):
    """The report could not reach the stdout gradcheck started with (closed, a reader gone): the one line says
    where it would have gone."""


class KeptStdio:
    """The stdout and stderr ``gradcheck exec`` started with, kept for its report and its own lines whatever the
    program does to them (replaces or closes sys.stdout, closes fd 1, ``dup2``s over it).

    Both fds are duplicated at start (close-on-exec, so a child process never holds a pipe open through them) and
    checked to be the same file before use: a program that closed the copy and opened another file on its number
    never gets the report. The report starts on a line of its own: after the program's streams are flushed
    (Python's and C's), a regular file's last byte says whether the program left a line open; elsewhere the end of
    what it wrote through Python's sys.stdout does (output below Python, to a pipe or a terminal, is not seen)."""

    def __init__(self, report_on_stdout: bool = True) -> None:
        from gradcheck.engine.hosting import keep_std_streams

        self.encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
        self.color, self.width = (color(), width()) if sys.stdout is not None else (False, 100)  # before the program
        self.out = _duplicate(1) if report_on_stdout else None
        self.err = _duplicate(2)
        keep_std_streams(stdout=report_on_stdout)

    def report(self, text: str) -> None:
        """The report on the original stdout, on a line of its own. Raises ReportNotWritten."""
        from gradcheck.engine.hosting import flush_program_streams, tail_of

        flush_program_streams()
        if self.out is None:
            raise ReportNotWritten("stdout was closed when gradcheck started")
        fd, identity = self.out
        try:
            if _identity(fd) != identity:
                raise ReportNotWritten("the program closed gradcheck's copy of stdout")
            open_line = _ends_open(fd)
            if open_line is None:
                tail = tail_of("stdout")
                open_line = bool(tail) and not tail.endswith("\n")
            _write_all(fd, (("\n" if open_line else "") + text).encode(self.encoding, errors="replace"))
        except OSError as exc:
            raise ReportNotWritten(exc.strerror or str(exc)) from None

    def line(self, message: str, kind: str = "error") -> None:
        """``gradcheck: error: …`` (or ``note:``) on the original stderr, after what the program left there, on its
        own line."""
        from gradcheck.engine.hosting import flush_program_streams, tail_of

        flush_program_streams()
        tail = tail_of("stderr")
        text = ("\n" if tail and not tail.endswith("\n") else "") + f"gradcheck: {kind}: {message}\n"
        if self.err is None or _identity(self.err[0]) != self.err[1]:
            return
        with contextlib.suppress(OSError):
            _write_all(self.err[0], text.encode(errors="backslashreplace"))
            if tail is not None:
                sys.__stderr__.tail = "\n"  # gradcheck's line ended the line


def _duplicate(fd: int) -> tuple[int, tuple] | None:
    """A close-on-exec copy of ``fd`` above the numbers programs use, and what file it is; None when closed."""
    try:
        import fcntl

        copy = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 64)
    except (ImportError, AttributeError, OSError):
        try:
            copy = os.dup(fd)
        except OSError:
            return None
    return copy, _identity(copy)


def _identity(fd: int) -> tuple | None:
    try:
        found = os.fstat(fd)
    except OSError:
        return None
    return found.st_dev, found.st_ino, found.st_mode


def _ends_open(fd: int) -> bool | None:
    """For a regular file: whether its last byte before where the report goes is no newline (False when nothing
    is there). None for anything else, or when the file cannot be read back."""
    import stat

    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        import fcntl

        appending = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_APPEND
        position = os.fstat(fd).st_size if appending else os.lseek(fd, 0, os.SEEK_CUR)
        if position == 0:
            return False
        with open(f"/proc/self/fd/{fd}", "rb") as reader:
            return os.pread(reader.fileno(), 1, position - 1) != b"\n"
    except (OSError, ImportError):
        return None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
