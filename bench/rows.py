"""One benchmark row: its line of BENCHMARKS.md and the number `make bench` keeps for the next run to compare with.

Every measuring function returns ``Row``s, so the Markdown a person reads and the JSON bench/baseline.json keeps are
built from the same values: a row cannot say one thing in the table and be compared as another.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Row:
    """``key`` names the row in bench/baseline.json (unique: "E3-10000"); ``label`` is the id column of the table
    ("E3", shared by a group's rows). ``value`` is the headline number the next run compares (None: a row with
    nothing comparable, e.g. a failed run), in ``unit``; ``better`` says which way is an improvement; ``rounds`` are
    the per-round values behind a median (their spread is the row's noise); ``extra`` keeps the numbers behind it."""

    key: str
    what: str
    measured: str
    goal: str = "—"
    status: str = "—"
    value: float | None = None
    unit: str = "×"
    better: str = "lower"
    rounds: tuple[float, ...] = ()
    extra: dict = field(default_factory=dict)
    label: str = ""

    def markdown(self) -> str:
        return f"| {self.label or self.key} | {self.what} | {self.measured} | {self.goal} | {self.status} |"

    def record(self) -> dict:
        """What bench/baseline.json keeps of this row (the run's date, commit and machine are added by the caller)."""
        return {
            "value": self.value,
            "unit": self.unit,
            "better": self.better,
            "goal": self.goal,
            "status": self.status.strip("*"),
            "rounds": [round(x, 6) for x in self.rounds],
            **({"extra": self.extra} if self.extra else {}),
        }


TABLE_HEAD = "| id | what | measured | goal | status |\n|----|------|----------|------|--------|"


def table(rows: list[Row]) -> str:
    return "\n".join([TABLE_HEAD, *(row.markdown() for row in rows)])


def ok(met: bool) -> str:
    return "met" if met else "**missed**"


def at_most(value: float, goal: float) -> tuple[str, str]:
    """(goal cell, status cell) of a "no more than ``goal``×" row."""
    return f"≤ {goal:g}×", ok(value <= goal)


def rounds_text(values, digits: int = 3) -> str:
    return ", ".join(f"{x:.{digits}f}" for x in values)


def median(values) -> float:
    return statistics.median(values)
