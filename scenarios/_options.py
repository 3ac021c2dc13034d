"""The built-in scenarios' ``--set`` values, checked at the top of ``setup()`` before any work.

A value that makes no sense raises ValueError naming the option; with ``--set`` given, the engine reports that as
a usage error (exit 2): ``cartpole: setup() rejected --set steps=-3: steps must be a whole number of at least 1``.
"""

from __future__ import annotations

import math


def whole(name: str, value, minimum: int = 1) -> int:
    """``value`` (a string from ``--set``, or a number) as an int of at least ``minimum``."""
    try:
        number = int(str(value).strip()) if not isinstance(value, bool) else None
    except ValueError:
        number = None
    if number is None or number < minimum:
        raise ValueError(f"{name} must be a whole number of at least {minimum}, got {value!r}")
    return number


def positive(name: str, value) -> float:
    """``value`` as a finite float above zero."""
    try:
        number = float(str(value).strip()) if not isinstance(value, bool) else math.nan
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return number


def choice(name: str, value, choices: tuple[str, ...]) -> str:
    """``value``, one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(repr(c) for c in choices)}, got {value!r}")
    return value
