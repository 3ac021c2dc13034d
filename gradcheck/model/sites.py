"""How a place in a program is said in a finding: ``train.py:40`` for ``/long/path/train.py:40``.

Every finding names sites (launches, reads, backward calls) beside a kernel or an array; the full path goes to the
evidence, the short form to what a person reads. One function for every layer that says one.
"""

from __future__ import annotations

import os


def short_site(site: str | None) -> str | None:
    """``file.py:LINE`` for ``path/to/file.py:LINE``; the file's name alone for a site without a line; None for none."""
    if not site:
        return None
    path, colon, line = str(site).rpartition(":")
    return f"{os.path.basename(path)}:{line}" if colon and line.isdigit() else os.path.basename(str(site))
