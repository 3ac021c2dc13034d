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

from dataclasses import dataclass

from gradcheck.model.options import AUDIT_EVERY as EVERY
from gradcheck.model.options import AUDIT_FIRST as FIRST


@dataclass(frozen=True)
class Cadence:
    first: int = FIRST
    every: int = EVERY

    def full(self, backward: int) -> bool:
        """Whether backward number ``backward`` (1-based) gets the full evidence."""
        if self.every <= 1 or backward <= self.first:
            return True
        past = backward - self.first  # the pairs: first + k * every and the backward after it, k >= 1
        return past >= self.every and past % self.every in (0, 1)

    def describe(self, backwards: int, audited: int) -> dict:
        return {"first": self.first, "every": self.every, "backwards": backwards, "audited": audited}


ALL = Cadence(first=0, every=1)


class AuditWindows:
    """The Observer's side of the cadence: leaving an audited window, arming the next, and a backward that goes
    unaudited (a counter, the driver's callbacks, and the struct-pointer check when structs are passed)."""

    def _sampling(self) -> dict | None:
        """What a long run kept (the report's ``sampling``): None when every backward was audited and recorded."""
        from gradcheck.observe.log import HISTORY

        kept = len(self.log.records)
        if self.audited >= self.backwards and kept >= self.log.iterations:
            return None
        return self.cadence.describe(self.backwards, self.audited) | {"records_kept": kept, "norm_points": HISTORY}

    def _go_light(self) -> None:
        """Leave the audited window: its zero step is judged and its iteration closed now; what it watched (the
        leftovers, the gradients' use) ends here, so the next audited backward starts afresh."""
        if self._light:
            return
        self._flush_zero()
        self._close_window()
        self._close()
        self.leftovers.forget()
        self.rows.forget()  # the gradients read between backwards (observe.row_reads)
        self.inputs.clear()
        self._wars.clear()
        self._last, self._moved, self._leaf_values = None, False, None
        self._light = True
        if self.launch_switch is not None:
            self.launch_switch.off()

    def _arm(self) -> None:
        """An audited backward is coming: its recording's launches and what follows it are watched again."""
        self._light = False
        if self.launch_switch is not None:
            self.launch_switch.on()

    def _stays_light(self, tape) -> bool:
        """A backward the cadence skips stays unaudited unless the tape passes structs whose adjoint pointers are
        stale or dangling now (those are judged before every backward, and one found makes it an audited one), or
        the loss is growing with a gradient (observe.divergence needs consecutive backwards to see it diverge)."""
        if self.log.growth.following:
            return False  # the loss and a gradient grew on the last backward: each next one is audited till it falls
        if not self._light:
            with self._guard("iteration"):
                self._go_light()
        if not (self.arguments.struct_roots or self.pointers.watching):
            return True
        found = []
        with self._guard("struct pointers"):
            self.arguments.update(tape)
            found = self.pointers.audit(self.arguments.struct_roots, first=False)
        return not found

    def _light_backward(self, run, tape, loss, grads):
        self.backwards += 1
        self._depth += 1  # the backward's own launches and copies are not the program's
        try:
            result = run()
        finally:
            self._depth -= 1
        with self._guard("nonfinite sentinel"):
            if not sentinel_finite(self.book.params()):
                self._late_audit(tape, loss, grads)
        self._tell_driver()
        return result

    def _tell_driver(self) -> None:
        """A backward ran, audited or not: the driver's callbacks (exec refreshes --output)."""
        for callback in self.after_backward:
            with self._guard("after backward (driver)"):
                callback()

    def _late_audit(self, tape, loss, grads) -> None:
        """A param's gradient went non-finite on a backward the cadence skipped: what can still be read after it
        (every gradient's statistics, what the tape reached) is recorded as an audited backward of its own, and
        the window after it is watched (the update that consumes it, the zero step)."""
        from gradcheck.model.sites import caller_site
        from gradcheck.observe.iteration import Iteration

        self._arm()
        self.audited += 1
        self._it = Iteration(self.backwards, boundary=True, backwards=1, site=caller_site())
        self.names.new_event()
        self.names.tape = tape
        self.arguments.update(tape)
        self.book.note_tape(tape, self.arguments.unique, loss, grads, self.names.label)
        self._after_backward(tape, loss, grads)


SENTINEL_ELEMENTS = 1 << 20  # per array: a larger param's gradient is read only on audited backwards


def sentinel_finite(params) -> bool:
    """Whether every param's gradient is free of NaN and Inf: read after every backward the cadence skips, so a
    NaN on one late backward is not lost between two audited pairs. On the CPU a NumPy view of the gradient (no
    copy, ~5 µs for a thousand values); elsewhere the statistics kernel."""
    import numpy as np

    from gradcheck.measure.liveness import readable
    from gradcheck.warp_compat import is_float_array

    device_side = []
    for param in params:
        grad = getattr(param, "grad", None)
        if grad is None or not is_float_array(grad) or grad.size > SENTINEL_ELEMENTS or not readable(grad):
            continue
        if grad.device.is_cpu and grad.is_contiguous:
            if not np.isfinite(grad.numpy()).all():
                return False
        else:
            device_side.append(grad)
    if device_side:
        from gradcheck.measure.stats import gradient_stats

        return not any(s.nonfinite for s in gradient_stats(device_side))
    return True
