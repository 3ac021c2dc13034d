"""Progress on stderr while scenarios run: one rich bar over the scenarios and one per scenario's passes.

Only when stderr is a terminal and not ``--quiet``: in CI logs and pipes a redrawn bar is noise, and
stderr then carries just the one-line errors. Rich honours ``NO_COLOR`` for the bar's colours.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator


class Bars:
    """The two callbacks the pipeline takes: ``passes`` (runner.Progress) and ``scenarios``."""

    def __init__(self, progress, total: int | None) -> None:
        self._progress = progress
        self._tasks: dict[str, int] = {}
        self._overall = progress.add_task("scenarios", total=total) if total is None or total > 1 else None

    def passes(self, name: str, index: int, passes: int) -> None:
        if name not in self._tasks:
            self._tasks[name] = self._progress.add_task(f"{name} passes", total=passes)
        self._progress.update(self._tasks[name], completed=index)

    def scenarios(self, name: str, done: int, total: int) -> None:
        if self._overall is not None:
            self._progress.update(self._overall, completed=done, total=total, description=f"scenarios (last: {name})")


@contextlib.contextmanager
def progress_bars(quiet: bool, total: int | None = None) -> Iterator[Bars | None]:
    """Bars for ``total`` scenarios (None: learnt from the first update) on a terminal's stderr; None
    (report nothing) otherwise."""
    if quiet or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as progress:
        yield Bars(progress, total)
