"""Where a program called in, and how a place is said in a finding.

Found: ``file:line`` of the innermost frame of the program's own code. "The program's own code" is everything but
the machinery around it: gradcheck (its built-in scenarios and examples excepted: they are programs), PyTorch's
library, Warp's library (``warp.*``, except the programs Warp ships: ``warp.tests``, ``warp.examples``, whose code is
a program like any other), and Python's machinery that runs a program (runpy, unittest, contextlib, importlib,
pytest). A site inside ``unittest/case.py`` or ``runpy.py`` tells a user nothing. The file as an absolute path, as
``python`` makes ``__file__``: a report read in another directory, or after the program changed directory, still
points at the right file.

Said: ``train.py:40`` for ``/long/path/train.py:40``. Every finding names sites (launches, reads, backward calls)
beside a kernel or an array; the full path goes to the evidence, the short form to what a person reads. Pure Python:
every layer that finds or says a site uses this one module.
"""

from __future__ import annotations

import functools
import os
import sys

_MACHINERY = (
    "gradcheck", "runpy", "contextlib", "unittest", "importlib", "_pytest", "pytest", "pluggy", "typer", "torch",
)  # fmt: skip
_OWN_PROGRAMS = ("scenarios", "examples")  # gradcheck.scenarios.*, gradcheck.examples.*: programs gradcheck ships
_WARP_PROGRAMS = ("tests", "examples")  # warp.tests.*, warp.examples.*: programs that ship with Warp


@functools.lru_cache(maxsize=4096)
def is_program_module(name: str) -> bool:
    """Whether code of the module ``name`` (a frame's ``__name__``) is the program's, not machinery around it."""
    parts = (name or "").split(".")
    if parts[0] == "warp":
        return len(parts) > 1 and parts[1] in _WARP_PROGRAMS
    if parts[0] == "gradcheck":
        return len(parts) > 1 and parts[1] in _OWN_PROGRAMS
    return parts[0] not in _MACHINERY


def program_frames(frame):
    """The frames of the program's own code, innermost first, from ``frame`` outwards."""
    while frame is not None:
        if is_program_module(frame.f_globals.get("__name__", "") or ""):
            yield frame
        frame = frame.f_back


def frame_site(frame) -> str:
    """``/abs/path/file.py:LINE`` of ``frame``."""
    return f"{absolute(frame.f_code.co_filename)}:{frame.f_lineno}"


@functools.lru_cache(maxsize=4096)
def absolute(filename: str) -> str:
    """``filename`` absolute (resolved against the directory the first time it is seen: Python's own code
    objects carry absolute paths except where the program was started with a relative one); ``<stdin>`` as is."""
    if not filename or filename.startswith("<") or os.path.isabs(filename):
        return filename
    return os.path.abspath(filename)


_DRIVERS = ("gradcheck.engine.", "gradcheck.cli.")  # gradcheck's drivers: what calls them is a launcher


def caller_site() -> str | None:
    """``file:line`` of the innermost frame of the program itself, above the driver that runs it: under ``run`` the
    engine itself calls ``tape.backward`` for a scenario without a backward hook, and the frames below it (the
    console script, a ``--timeout`` worker's multiprocessing bootstrap, a test calling ``gradcheck.check``) called
    gradcheck, not Warp: such a call has no site, never the launcher's line."""
    frame = sys._getframe(1)
    try:
        while frame is not None:
            name = frame.f_globals.get("__name__", "") or ""
            if is_program_module(name):
                return frame_site(frame)
            if name.startswith(_DRIVERS):
                return None
            frame = frame.f_back
        return None
    finally:
        del frame


def short(site: str | None) -> str:
    """``train.py:40`` for ``path/to/train.py:40``."""
    return short_site(site) or "?"


def short_site(site: str | None) -> str | None:
    """``file.py:LINE`` for ``path/to/file.py:LINE``; the file's name alone for a site without a line; None for none."""
    if not site:
        return None
    path, colon, line = str(site).rpartition(":")
    return f"{os.path.basename(path)}:{line}" if colon and line.isdigit() else os.path.basename(str(site))
