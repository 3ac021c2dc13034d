"""Subject paths: grouping indexed families such as ``controls[0..99].joint_f``.

A 100-step rollout has 100 control arrays; a report that lists each one separately hides the
signal. Checks and tables group paths that differ only in their list indices.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")
_INDEX = re.compile(r"\[\d+\]")


def family(path: str) -> str:
    """``controls[37].joint_f`` → ``controls[*].joint_f``."""
    return _INDEX.sub("[*]", path)


def group_by_family(items: Iterable[T], key: Callable[[T], str]) -> dict[str, list[T]]:
    """Groups in first-seen order, members in input order."""
    groups: dict[str, list[T]] = {}
    for item in items:
        groups.setdefault(family(key(item)), []).append(item)
    return groups


def family_sizes(names: Iterable[str]) -> dict[str, int]:
    """How many params each family has (``controls[*].joint_f`` → 100)."""
    sizes: dict[str, int] = {}
    for name in names:
        key = family(name)
        sizes[key] = sizes.get(key, 0) + 1
    return sizes


def family_prefix(count: int, size: int, fam: str, shown: str = "worst") -> str:
    """Message prefix for a finding that stands for several members of a family ("" for one)."""
    if count == 1:
        return ""
    return f"{count} of {size} arrays {fam}" + (f", {shown} shown: " if shown else ": ")
