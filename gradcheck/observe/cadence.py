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

    def _go_light(self) -> None:
        """Leave the audited window: its zero step is judged and its iteration closed now; what it watched (the
        leftovers, the gradients' use) ends here, so the next audited backward starts afresh."""
        if self._light:
            return
        self._flush_zero()
        self._close_window()
        self._close()
        self.leftovers.forget()
        self._inputs.clear()
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
        stale or dangling now: those are judged before every backward, and one found makes it an audited one."""
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

    def _light_backward(self, run):
        self.backwards += 1
        self._depth += 1  # the backward's own launches and copies are not the program's
        try:
            result = run()
        finally:
            self._depth -= 1
        for callback in self.after_backward:
            with self._guard("after backward (driver)"):
                callback()
        return result
