"""Terminal behaviour through the real CLI on a pseudo-terminal: the progress bar, NO_COLOR, 80 columns.

The other CLI tests run without a TTY (like CI); these attach stdout or stderr to a pty of a chosen
size, because that is the only way to see what a user at a terminal sees.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
import unicodedata

from conftest import ROOT, SCENARIOS, stop

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
FACTORY = SCENARIOS / "factory.py"


def on_terminal(*args: str, stream: str, columns: int = 80, env: dict | None = None):
    """Run ``gradcheck ARGS`` with ``stream`` ("stdout" or "stderr") on a pty of ``columns`` columns;
    returns (exit code, what the pty showed, the other stream's text)."""
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    full_env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "COLUMNS", "TERM")}
    full_env |= {"TERM": "xterm-256color"} | (env or {})
    streams = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, stream: terminal}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gradcheck", *args],
        cwd=str(ROOT),
        env=full_env,
        stdin=subprocess.DEVNULL,
        **streams,
    )
    os.close(terminal)
    other = proc.stderr if stream == "stdout" else proc.stdout
    shown, rest = bytearray(), bytearray()
    deadline = time.monotonic() + 300
    open_fds = {controller, other.fileno()}
    try:
        while open_fds and time.monotonic() < deadline:
            ready, _, _ = select.select(list(open_fds), [], [], 1.0)
            for fd in ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # the pty reports EIO once the child closed it
                    chunk = b""
                if not chunk:
                    open_fds.discard(fd)
                (shown if fd == controller else rest).extend(chunk)
        assert not open_fds, f"gradcheck {' '.join(args)} still writing after 300 s: {bytes(shown[-2000:])!r}"
        code = proc.wait(timeout=60)
    finally:
        stop(proc)
        os.close(controller)
    return code, shown.decode("utf-8", "replace"), rest.decode("utf-8", "replace")


def cells(line: str) -> int:
    """Terminal cells a line takes (wide characters count two)."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


def test_progress_bar_on_a_terminal_stderr_and_silent_with_quiet():
    args = ("run", str(FACTORY), f"{FACTORY}:Linear", "--passes", "3", "--device", "cpu", "--fd", "off")
    code, shown, stdout = on_terminal(*args, stream="stderr")
    assert code == 0, shown
    assert "linear passes" in shown and "3/3" in ANSI.sub("", shown)  # the pass bar reached its end
    assert "scenarios" in shown  # and the bar over the two scenarios
    assert "\x1b[" in shown  # drawn with cursor control: a live bar, not log lines
    assert "no findings" in stdout and "\x1b[" not in stdout  # the report, uncoloured, in the pipe

    code, shown, _ = on_terminal(*args, "--quiet", stream="stderr")
    assert code == 0
    assert "passes" not in shown


def test_report_is_coloured_on_a_terminal_unless_no_color():
    args = ("run", "spring-chain", "--fault", "nan-backward", "--passes", "2", "--device", "cpu", "--fd", "off")
    code, shown, _ = on_terminal(*args, stream="stdout")
    assert code == 1
    assert "\x1b[" in shown and "nonfinite" in shown

    code, shown, _ = on_terminal(*args, stream="stdout", env={"NO_COLOR": "1"})
    assert code == 1
    assert "nonfinite" in shown
    assert "\x1b[" not in shown, repr(shown[:400])


def test_tables_fit_80_columns():
    """The widest report we have (long struct paths, a long message, a sparkline) at 80 columns: no
    line is wider than the terminal, and the key facts are still on screen."""
    args = ("run", "nested-struct", "--fault", "grad-replaced", "--passes", "3", "--device", "cpu")
    code, shown, _ = on_terminal(*args, stream="stdout", columns=80, env={"NO_COLOR": "1"})
    assert code == 1
    lines = shown.replace("\r\n", "\n").splitlines()
    assert max(cells(line) for line in lines) <= 80, max(lines, key=cells)
    text = " ".join(lines)
    for needle in ("stale-adjoint", "model.geo.thickness", "missing-gradient", "exit 1"):
        assert needle in text


def test_piped_report_honours_columns():
    proc = subprocess.run(
        [sys.executable, "-m", "gradcheck", "run", "nested-struct", "--fault", "grad-replaced", "--passes", "2"],
        capture_output=True,
        text=True,
        cwd=str(ROOT),
        env={**os.environ, "COLUMNS": "80"},
        stdin=subprocess.DEVNULL,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr
    assert max(cells(line) for line in proc.stdout.splitlines()) <= 80
