"""Which backwards of a long program get the full evidence: cost flat in training length.

A training run makes 10^5–10^6 backwards; the full evidence of one (statistics of every gradient the tape reaches,
the zero audit, fingerprints of the recording's inputs, the updates and reads that follow it) costs more than a
small backward itself. So a program's first ``first`` backwards are audited in full (where most mistakes show:
a forgotten ``tape.zero()`` at the second backward, a stale pointer at the first), and after them every
``every``-th backward *and the one after it* (the pair: leftovers of one backward are judged at the next), so a
mistake that persists is still found, at the first audited pair after it starts. Backwards in between cost a
counter, and the struct-pointer check when the tape passes structs (a dangling pointer is stopped before every
backward, audited or not). ``every=1`` audits every backward.

Only drivers without their own iterations sample (``gradcheck exec``, ``gradcheck.audit()``); ``gradcheck run``'s
passes are few and all audited.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import is_not
from typing import TYPE_CHECKING

from gradcheck.observe.config import ALL, Cadence
from gradcheck.observe.parts import ObserverPart

if TYPE_CHECKING:
    from gradcheck.observe.guard import Guard

__all__ = ["ALL", "AuditWindow", "Cadence", "Sentinel"]


class AuditWindow(ObserverPart):
    """Which backwards the observer audits, and the hooks' launch switch that follows: an audited window watches
    launches and host reads, the window between two audited pairs does not (Warp's own ``wp.launch`` again).

    ``leave``: the observer's own closing of a window (its zero step judged, its iteration closed, what it watched
    forgotten), called once when the cadence leaves one."""

    def __init__(self, cadence: Cadence, guard: Guard, leave: Callable[[], None]) -> None:
        self.cadence, self.guard, self._leave = cadence, guard, leave
        self.audited = 0  # backwards that got the full evidence
        self.light = False  # between audited windows: launches and host reads not watched
        self.switch = None  # the hooks' launch switch, while the observer is installed (warp_compat.hooks)
        self.tape_switch = None  # the hooks' recording and zero-step switch, likewise
        self.sentinel = Sentinel()  # the NaN/Inf watch of the backwards between audited ones
        # the next backward is light whatever happens before it (no part waits, no structs, the loss not growing),
        # decided when the last light one ended: the observer then skips straight to it (~10^4 times in a long run)
        self.lane = False
        self._entering: tuple = ()  # the parts whose waiting keeps the next recording watched (bind)
        self._beginning: tuple = ()  # the other parts whose waiting makes the next backward the observer's to decide
        self._asks_more: Callable[[], bool] = bool  # whether more than the parts would audit the next backward

    def bind(self, entering, beginning, asks_more: Callable[[], bool]) -> None:
        """The parts told of every recording (``entering``) and of every backward (``beginning``), unless idle; and
        ``asks_more()``: whether something besides them could audit the next backward (struct pointers to judge, a
        growing loss; none of it changes between audited windows)."""
        self._entering = tuple(entering)
        self._beginning = tuple(p for p in beginning if p not in self._entering)
        self._asks_more = asks_more

    def full(self, backward: int) -> bool:
        """Whether backward number ``backward`` (1-based) gets the full evidence."""
        return self.cadence.full(backward)

    def sampling(self, backwards: int, log) -> dict | None:
        """What a long run kept (the report's ``sampling``): None when every backward was audited and recorded."""
        from gradcheck.observe.log import HISTORY

        kept = len(log.records)
        if self.audited >= backwards and kept >= log.iterations:
            return None
        return self.cadence.describe(backwards, self.audited) | {"records_kept": kept, "norm_points": HISTORY}

    def launches(self, on: bool) -> None:
        """The hooks' launch switch on or off (a no-op while not installed)."""
        _flip(self.switch, on)

    def recordings(self, on: bool) -> None:
        """The hooks' recording and zero-step switch on or off (a no-op while not installed): off between windows
        while no part waits for the next recording (the observer asks after each backward it skips)."""
        _flip(self.tape_switch, on)

    def after_light(self, done: int) -> None:
        """A light backward ended, ``done`` backwards in: the next recording is watched only if its backward is
        audited or a part waits for it; and the next backward takes the lane when nothing but the cadence could
        audit it."""
        if not self.light:
            return
        watched = self.full(done + 1)
        for part in self._entering:
            watched = watched or not part.idle(done)
        if self.tape_switch is not None and self.tape_switch.active != watched:
            self.recordings(watched)
        self.lane = not watched and all(part.idle(done) for part in self._beginning) and not self._asks_more()

    def leave(self) -> None:
        """Leave the audited window: its zero step is judged and its iteration closed now; what it watched (the
        leftovers, the gradients' use) ends here, so the next audited backward starts afresh."""
        if self.light:
            return
        self._leave()
        self.light = True
        self.launches(False)

    def arm(self) -> None:
        """An audited backward is coming: its recording's launches and what follows it are watched again."""
        self.light = self.lane = False
        self.launches(True)
        self.recordings(True)

    def stays_light(self, growing: bool, structs_clean: Callable[[], bool] | None) -> bool:
        """A backward the cadence skips stays unaudited unless the tape passes structs whose adjoint pointers are
        stale or dangling now (those are judged before every backward, and one found makes it an audited one:
        ``structs_clean``; None: the tape passes none), or the loss is growing with a gradient (``growing``:
        observe.divergence needs consecutive backwards to see it diverge)."""
        if growing:
            return False  # the loss and a gradient grew on the last backward: each next one is audited till it falls
        if not self.light:
            with self.guard("iteration"):
                self.leave()
        return structs_clean() if structs_clean is not None else True

    def unaudited(self, run, gradients: Callable[[], list]) -> tuple:
        """Run a backward the cadence skips: (its result, whether every param's gradient is still finite). When one
        is not, the observer records what can still be read as an audited backward of its own. One stretch of the
        observer's own time around both (the hooks stand aside), not two scopes: this is most backwards of a run."""
        guard = self.guard
        guard.depth += 1
        try:
            result = run()  # the backward's own launches and copies are not the program's
            try:  # NumPy on the host; the kernel silences itself
                finite = self.sentinel.finite(gradients())
            except Exception as exc:  # noqa: BLE001 - gradcheck's failure is an internal error, never the program's
                guard.internal(f"{guard.role}: nonfinite sentinel", exc)
                finite = True
        finally:
            guard.depth -= 1
        return result, finite


def _flip(switch, on: bool) -> None:
    if switch is not None:
        switch.on() if on else switch.off()


SENTINEL_ELEMENTS = 1 << 20  # per array: a larger param's gradient is read only on audited backwards


class Sentinel:
    """Whether every param's gradient is free of NaN and Inf: read after every backward the cadence skips, so a
    NaN on one late backward is not lost between two audited pairs. On the CPU a NumPy view of the gradient (no
    copy); elsewhere the statistics kernel. The views (and the kernel's plan) are kept while the params keep the
    same gradient arrays: making a view cost ~5 µs a param on every backward of a long run, more than reading it."""

    def __init__(self) -> None:
        self._grads: tuple = ()  # the gradients the views were made of (held: their ids stay theirs)
        self._host: list = []  # NumPy views of the CPU ones
        self._device: list = []  # the others, read by the statistics kernel
        self._plan = None
        self._numpy = None  # (np.isfinite, np.logical_and.reduce), looked up once NumPy is needed

    def finite(self, grads: list) -> bool:
        """``grads``: the params' gradients (None where a param has none)."""
        if len(grads) != len(self._grads) or any(map(is_not, grads, self._grads)):
            self._prepare(tuple(grads))
        if self._host:
            # not a sum first: an overflow or Inf - Inf would warn on the program's stderr
            isfinite, every = self._numpy
            for view in self._host:
                if not every(isfinite(view)):
                    return False
        if self._device:
            from gradcheck.measure.stats import StatsPlan
            from gradcheck.warp_compat.runtime import quiet

            self._plan = self._plan or StatsPlan()
            with quiet():  # loading the statistics kernel says so on the program's stdout otherwise
                return not any(s.nonfinite for s in self._plan.table(self._device).rows())
        return True

    def _prepare(self, grads: tuple) -> None:
        import numpy as np

        from gradcheck.measure.liveness import readable
        from gradcheck.warp_compat import is_float_array

        self._numpy = (np.isfinite, np.logical_and.reduce)  # looked up once: asked after every skipped backward
        self._grads, self._host, self._device = grads, [], []
        for grad in grads:
            if grad is None or not is_float_array(grad) or grad.size > SENTINEL_ELEMENTS or not readable(grad):
                continue
            if grad.device.is_cpu and grad.is_contiguous:
                self._host.append(grad.numpy().reshape(-1))  # flat: one reduction over every value
            else:
                self._device.append(grad)
