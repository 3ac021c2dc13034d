"""Where the program called in: ``file:line`` of the first frame outside Warp and gradcheck.

The file as Python knows it (absolute for a script run by path, as ``python`` makes ``__file__``): a report read in
another directory, or after the program changed directory, still points at the right file.
"""

from __future__ import annotations

import os
import sys

_SKIPPED = ("warp", "gradcheck", "contextlib")


def caller_site() -> str | None:
    """``file:line`` of the innermost frame of the program itself (not Warp's, gradcheck's or contextlib's)."""
    frame = sys._getframe(1)
    try:
        while frame is not None:
            module = frame.f_globals.get("__name__", "") or ""
            if module.split(".")[0] not in _SKIPPED or module.startswith("gradcheck.scenarios"):
                return f"{frame.f_code.co_filename}:{frame.f_lineno}"
            frame = frame.f_back
        return None
    finally:
        del frame


def short(site: str | None) -> str:
    """``train.py:40`` for ``path/to/train.py:40``."""
    if not site:
        return "?"
    path, _, line = site.rpartition(":")
    return f"{os.path.basename(path)}:{line}"
