"""Did a row get slower? The new run's rows against the numbers bench/baseline.json kept from the last `make bench`.

Pure Python on plain dicts (what bench/baseline.json holds and ``Row.record()`` gives), so tests can fake both
sides. A row is *slower* when its value moved the wrong way by more than its noise: the larger relative spread
((max - min) / median) of the two runs' rounds, at least ``NOISE_FLOOR`` (two lucky rounds that agree to 0.1% are
not a noise estimate); ``DEFAULT_NOISE`` when neither run kept rounds (a single timing, a one-round row).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

NOISE_FLOOR = 0.03
DEFAULT_NOISE = 0.10


@dataclass(frozen=True)
class Change:
    """One row's comparison. ``worse`` is the relative change in the bad direction (+0.20: 20% slower, whichever
    way the row counts as better); ``verdict`` is "slower", "faster", "same" (within ``noise``), "new" (no previous
    number) or "not comparable" (a unit or direction changed, or a value is missing)."""

    key: str
    previous: float | None
    now: float | None
    unit: str
    worse: float | None
    noise: float
    verdict: str


def spread(rounds) -> float | None:
    """(max - min) / median of ``rounds``, or None with fewer than two (no spread is known)."""
    values = [float(x) for x in rounds or ()]
    if len(values) < 2:
        return None
    middle = statistics.median(values)
    return (max(values) - min(values)) / abs(middle) if middle else None


def noise(previous_rounds, now_rounds) -> float:
    known = [s for s in (spread(previous_rounds), spread(now_rounds)) if s is not None]
    return max(max(known), NOISE_FLOOR) if known else DEFAULT_NOISE


def compare_row(key: str, previous: dict | None, now: dict) -> Change:
    value, unit = now.get("value"), now.get("unit", "")
    if previous is None or previous.get("value") is None:
        return Change(key, None, value, unit, None, 0.0, "new")
    old = previous["value"]
    band = noise(previous.get("rounds"), now.get("rounds"))
    same_footing = previous.get("unit") == unit and previous.get("better", "lower") == now.get("better", "lower")
    if value is None or not old or not same_footing:
        return Change(key, old, value, unit, None, band, "not comparable")
    relative = (value - old) / abs(old)
    worse = -relative if now.get("better", "lower") == "higher" else relative
    verdict = "slower" if worse > band else "faster" if worse < -band else "same"
    return Change(key, old, value, unit, worse, band, verdict)


def compare(previous: dict[str, dict], now: dict[str, dict]) -> list[Change]:
    """Every row of ``now`` (key → record) against ``previous`` (key → record), in ``now``'s order."""
    return [compare_row(key, previous.get(key), record) for key, record in now.items()]


def regressions(changes: list[Change]) -> list[Change]:
    return [c for c in changes if c.verdict == "slower"]


def _number(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    return f"{value:.3f}{unit}" if unit == "×" else f"{value:.3f} {unit}"


def table(changes: list[Change]) -> str:
    """A short plain-text table: row, previous, now, change, noise, verdict (SLOWER in capitals)."""
    lines = [("row", "previous", "now", "change", "noise", "verdict")]
    for c in changes:
        change = "—" if c.worse is None else f"{100 * c.worse:+.1f}% " + ("worse" if c.worse > 0 else "better")
        verdict = "SLOWER" if c.verdict == "slower" else c.verdict
        band = f"±{100 * c.noise:.0f}%" if c.noise else "—"
        lines.append((c.key, _number(c.previous, c.unit), _number(c.now, c.unit), change, band, verdict))
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines)


def summary(changes: list[Change]) -> str:
    slower = regressions(changes)
    if not slower:
        return f"no row got slower beyond its noise ({len(changes)} compared)"
    return f"{len(slower)} row(s) got slower beyond their noise: " + ", ".join(c.key for c in slower)
