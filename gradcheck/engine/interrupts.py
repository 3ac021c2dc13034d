"""Ctrl-C and SIGTERM: stop within a second, report what finished, exit 128 + the signal's number.

Why a handler of our own: a scenario's code may itself raise KeyboardInterrupt (or call sys.exit); that is a
broken scenario (exit 3, with the report), not the user asking to stop. Python cannot tell the two apart after
the fact, so while scenarios run, SIGINT and SIGTERM raise ``Interrupted`` (a KeyboardInterrupt, so code that
handles Ctrl-C still does) and nothing else is taken for the user's request. SIGTERM is the polite stop a CI
runner or ``timeout`` sends: without a handler Python dies at once, leaving a worker process orphaned and no
report.
"""

from __future__ import annotations

import contextlib
import signal
import threading

from gradcheck.model.exit_codes import ExitCode


class Interrupted(KeyboardInterrupt):
    """The user (SIGINT) or the system (SIGTERM) asked gradcheck to stop."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.TERMINATED if self.signum == signal.SIGTERM else ExitCode.INTERRUPTED

    @property
    def what(self) -> str:
        return "SIGTERM" if self.signum == signal.SIGTERM else "Ctrl-C (SIGINT)"


def _raise(signum, _frame):
    raise Interrupted(signum)


@contextlib.contextmanager
def watch(signals: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)):
    """While inside, ``signals`` (SIGINT and SIGTERM) raise Interrupted, main thread only. SIGINT whatever handled
    it before (pytest's own handler included), unless it is ignored (a background job must stay deaf to the
    terminal's Ctrl-C); SIGTERM only where nobody installed a handler. The previous handlers come back on exit;
    nested use is harmless.

    ``gradcheck exec`` watches SIGTERM only: a hosted program must find Python's own SIGINT handler
    (``default_int_handler``), as under python, so any KeyboardInterrupt that escapes it is taken for Ctrl-C."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    replaced = {}
    for signum in signals:
        previous = signal.getsignal(signum)
        takeover = previous is not signal.SIG_IGN if signum == signal.SIGINT else previous in (signal.SIG_DFL, _raise)
        if takeover and previous is not None:
            replaced[signum] = previous
            signal.signal(signum, _raise)
    try:
        yield
    finally:
        for signum, previous in replaced.items():
            signal.signal(signum, previous)


def ending(exc: BaseException) -> str:
    """How a scenario tried to end the process, for the error line."""
    if isinstance(exc, SystemExit):
        return f"SystemExit({exc.code!r}) (sys.exit)"
    return type(exc).__name__
