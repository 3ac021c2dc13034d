"""Line charts as inline SVG, for the report page: the loss and the gradients' norms over a run.

A chart is a few hundred bytes plus a few per point, and never more than ``MAX_POINTS`` points a series: a longer
series keeps, in each of ``MAX_POINTS // 2`` equal stretches of its x range, its lowest and highest point (a spike
is never thinned away). A norm spans orders of magnitude, so the y axis is logarithmic when every value is positive
and they span more than ``LOG_SPAN``. A NaN or infinity is a red cross at the top edge, a zero on a logarithmic
axis a hollow mark at the bottom; each point's value is its hover text (SVG ``<title>``), no JavaScript.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

MAX_POINTS = 400
TINY, HUGE = 1e-300, 1e300  # a logarithmic axis starts no lower; a linear one's range is computed within ±HUGE
LOG_SPAN = 50.0
MARKED = 80  # a series this short gets a mark (and hover text) on every point
WIDTH, HEIGHT = 520, 190
LEFT, RIGHT, TOP, BOTTOM = 62, 12, 10, 30
BAD = "#d62728"  # a NaN or infinity's cross; no series is drawn in it
COLOURS = ("#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f")


@dataclass(frozen=True)
class Series:
    label: str
    xs: tuple[int, ...]  # the pass or backward of each value
    ys: tuple[float | None, ...]  # None: not measured there (a gap in the line)


def colour(index: int) -> str:
    return COLOURS[index % len(COLOURS)]


def chart(series: list[Series], *, label: str, y_name: str, x_name: str = "backward") -> str:
    """One ``<svg>`` of ``series`` (a colour each, in order); ``label`` is its accessible name, ``x_name`` what
    its x axis counts (a pass of ``run``, a backward of a program)."""
    thinned = [_thinned(s) for s in series]
    finite = [y for s in thinned for y in s.ys if _finite(y)]
    xs = [x for s in thinned for x in s.xs]
    if not xs:
        return ""
    positive = [y for y in finite if y > 0]
    log = bool(positive) and min(finite) >= 0 and max(positive) / min(positive) > LOG_SPAN
    scale = _Scale(min(xs), max(xs), finite, log)
    parts = [_axes(scale, y_name, x_name)]
    if not finite:
        parts.append(f'<text x="{(LEFT + WIDTH - RIGHT) / 2:.0f}" y="{(TOP + HEIGHT - BOTTOM) / 2:.0f}" '
                     'text-anchor="middle">no finite value</text>')  # fmt: skip
    for k, s in enumerate(thinned):
        parts.append(_line(s, scale, colour(k), x_name))
    return (
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" '
        f'aria-label="{escape(label)}">' + "".join(parts) + "</svg>"
    )


def _finite(y) -> bool:
    return isinstance(y, (int, float)) and math.isfinite(y)


def _thinned(series: Series) -> Series:
    """At most MAX_POINTS points: each stretch's lowest and highest finite value, and every NaN/Inf's first."""
    if len(series.xs) <= MAX_POINTS:
        return series
    lo, hi = series.xs[0], series.xs[-1]
    buckets = (MAX_POINTS - 2) // 3  # three points a stretch at most, and the first and the last
    kept: dict[int, tuple[int, int | None, int | None, int | None]] = {}
    for i, (x, y) in enumerate(zip(series.xs, series.ys)):
        b = min(buckets - 1, int((x - lo) / max(hi - lo, 1) * buckets))
        low, high, bad = kept.get(b, (i, None, None, None))[1:]
        if _finite(y):
            low = i if low is None or y < series.ys[low] else low
            high = i if high is None or y > series.ys[high] else high
        elif y is not None and bad is None:
            bad = i
        kept[b] = (i, low, high, bad)
    chosen = sorted({i for _, *rest in kept.values() for i in rest if i is not None} | {0, len(series.xs) - 1})
    return Series(series.label, tuple(series.xs[i] for i in chosen), tuple(series.ys[i] for i in chosen))


class _Scale:
    def __init__(self, x0: int, x1: int, ys: list[float], log: bool) -> None:
        self.single = x1 == x0  # one pass or backward: its point in the middle, one tick
        self.x0, self.x1, self.log = (x0 - 1, x0 + 1, log) if self.single else (x0, x1, log)
        values = [math.log10(y) for y in ys if y >= TINY] if log else [min(max(y, -HUGE), HUGE) for y in ys]
        lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
        if hi == lo:
            lo, hi = lo - (abs(lo) or 1) * 0.5, hi + (abs(hi) or 1) * 0.5
        pad = (hi - lo) * 0.05
        self.lo, self.hi = lo - pad, hi + pad

    def x(self, x: float) -> float:
        return LEFT + (x - self.x0) / (self.x1 - self.x0) * (WIDTH - LEFT - RIGHT)

    def y(self, y: float) -> float:
        v = math.log10(max(y, TINY)) if self.log else min(max(y, -HUGE), HUGE)
        return TOP + (self.hi - v) / (self.hi - self.lo) * (HEIGHT - TOP - BOTTOM)

    def y_ticks(self) -> list[tuple[float, str]]:
        if self.log:
            first, last = math.ceil(self.lo), math.floor(self.hi)
            step = max(1, math.ceil((last - first + 1) / 5))
            return [(10.0**d, f"1e{d}") for d in range(first, last + 1, step)]
        ticks = _nice(self.lo, self.hi)
        step = ticks[1] - ticks[0] if len(ticks) > 1 else 0.0
        return [(v, _tick(v, step)) for v in ticks]

    def x_ticks(self) -> list[float]:
        if self.single:
            return [self.x0 + 1]
        return [v for v in _nice(self.x0, self.x1) if v == int(v)]


def _nice(lo: float, hi: float, count: int = 5) -> list[float]:
    span = hi - lo
    if not math.isfinite(span) or span <= 0:
        return []
    raw = span / count
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step) + 1)]


def _short(v: float) -> str:
    return f"{v:.4g}" if v else "0"


def _tick(v: float, step: float) -> str:
    """A tick label with as many decimals as the step between ticks needs (2.8217 to 2.8387 reads 2.822, 2.824…)."""
    if not v or not step:
        return _short(v)
    magnitude = math.floor(math.log10(step))
    decimals = max(0, -magnitude + (0 if round(step / 10**magnitude, 6) in (1, 2, 5) else 1))
    if abs(v) < 1e6 and decimals <= 8:
        return f"{v:.{decimals}f}"
    return f"{v:.{max(3, decimals)}g}"


def _axes(scale: _Scale, y_name: str, x_name: str) -> str:
    bottom, right = HEIGHT - BOTTOM, WIDTH - RIGHT
    out = [f'<rect x="{LEFT}" y="{TOP}" width="{right - LEFT}" height="{bottom - TOP}" class="plot"/>']
    for value, text in scale.y_ticks():
        y = scale.y(value)
        out.append(f'<line x1="{LEFT}" x2="{right}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        out.append(f'<text x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end">{text}</text>')
    for value in scale.x_ticks():
        x = scale.x(value)
        out.append(f'<text x="{x:.1f}" y="{bottom + 14}" text-anchor="middle">{int(value)}</text>')
    out.append(f'<text x="{(LEFT + right) / 2:.0f}" y="{HEIGHT - 3}" text-anchor="middle">{escape(x_name)}</text>')
    axis = f"{y_name} (log)" if scale.log else y_name
    out.append(f'<text x="12" y="{(TOP + bottom) / 2:.0f}" transform="rotate(-90 12 {(TOP + bottom) / 2:.0f})" '
               f'text-anchor="middle">{escape(axis)}</text>')  # fmt: skip
    return "".join(out)


def _line(series: Series, scale: _Scale, stroke: str, x_name: str) -> str:
    """The series as polylines broken at gaps and at values the axis cannot show, each marked."""
    runs, run, marks = [], [], []
    mark_all = len(series.xs) <= MARKED
    for x, y in zip(series.xs, series.ys):
        shown = _finite(y) and (y > 0 or not scale.log)
        if shown:
            point = (scale.x(x), scale.y(y))
            run.append(point)
            if mark_all:
                marks.append(_mark(point, f"{series.label}: {_short(y)} at {x_name} {x}", stroke))
            continue
        if run:
            runs.append(run)
            run = []
        if y is not None:
            bad = not _finite(y)
            at = (scale.x(x), TOP + 4 if bad else HEIGHT - BOTTOM - 4)
            said = "not finite (NaN or Inf)" if bad else "0"
            marks.append(_mark(at, f"{series.label}: {said} at {x_name} {x}", BAD if bad else stroke,
                               cross=bad, hollow=not bad))  # fmt: skip
    if run:
        runs.append(run)
    lines = "".join(
        f'<polyline fill="none" stroke="{stroke}" stroke-width="1.6" points="'
        + " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
        + '"/>'
        for points in runs
    )
    return f'<g class="series"><title>{escape(series.label)}</title>{lines}{"".join(marks)}</g>'


def _mark(at: tuple[float, float], tip: str, stroke: str, cross: bool = False, hollow: bool = False) -> str:
    x, y = at
    title = f"<title>{escape(tip)}</title>"
    if cross:
        return (f'<path d="M{x - 4:.1f},{y - 4:.1f} L{x + 4:.1f},{y + 4:.1f} M{x - 4:.1f},{y + 4:.1f} '
                f'L{x + 4:.1f},{y - 4:.1f}" stroke="{stroke}" stroke-width="2" class="bad">{title}</path>')  # fmt: skip
    fill = "#ffffff" if hollow else stroke
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.6" fill="{fill}" stroke="{stroke}">{title}</circle>'
