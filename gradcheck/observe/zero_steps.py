"""The program's zero step (``tape.zero()``, ``x.grad.zero_()``, a scenario's ``zero(tape)``), audited once it is
over: which gradients the last backward left that the step did not clear (observe.leftovers), and what the
program did with the gradients between the backward and the step (observe.gradient_use: updates, rewrites).

A step is over at the next recording, the next backward, the driver's word (``Observer.zero_step``), a new
iteration or the end; a zero step may be many calls (one ``zero_()`` per gradient), so it is judged only then.
"""

from __future__ import annotations

import contextlib
from operator import is_

from gradcheck.observe.parts import BackwardEvent, ObserverPart, PartContext


class ZeroSteps(ObserverPart):
    """The observer's part for zero steps; ``leftovers``: the observer's Leftovers, ``use``: its GradientUse,
    ``arguments``: its TapeArguments. What it finds goes into the iteration open now (``context.current()``)."""

    def __init__(self, context: PartContext, leftovers, use, arguments) -> None:
        self.guard, self._current, self.book, self.names = context.guard, context.current, context.book, context.names
        self.leftovers, self.use, self.arguments = leftovers, use, arguments
        self._label: str | None = None  # the zero step made and not yet audited, in words
        self._depth = 0  # inside the driver's zero step
        self._reached = None  # (_reach_key, Reachable) of the last backward, reused while the key holds

    @property
    def inside(self) -> bool:
        """The driver's zero step is running: the program's own zero calls are part of it."""
        return self._depth > 0

    @contextlib.contextmanager
    def step(self, label: str):
        """The driver runs the program's zero step inside; it is audited once, when the whole step is over."""
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            self._label = label
            with self.guard("zero audit"):
                self.flush()

    def zeroed(self, label: str) -> None:
        """The program zeroed its tape's gradients (``label``: where): the leftovers and the gradients' use told."""
        self._label = label
        self.leftovers.zeroed()
        self.use.zeroed(label)  # the window stays open: an update after it would read zeros

    def close_window(self) -> None:
        """The gradients' use window ends (a zero step is over, or a new iteration): what was found in it is kept."""
        rewrites, cleared = self.use.close()
        it = self._current()
        if it is not None:
            it.rewrites, it.cleared = it.rewrites + rewrites, it.cleared + cleared

    def flush(self) -> None:
        """Audit the zero step the program made (if any), now that it is over."""
        if self._label is None or self._depth:
            return
        label, self._label = self._label, None
        self.close_window()
        with self.guard("zero audit"):
            self.audit(label=label)

    def audit(self, label: str | None = None, only_left: set | None = None) -> None:
        """What the last backward left that survived (``only_left``: only these gradient pointers)."""
        it = self._current()
        if it is None:
            return
        if it.kept is None:
            it.settle_residue(self.leftovers.kept())
        survivors, audited = self.leftovers.audit(only_left=only_left)
        # an iteration may clear several times (one backward per output, a zero step after each): every survivor
        merged = {v.subject: v for v in (*it.survivors, *survivors)}
        it.survivors, it.audited, it.zero_step = tuple(merged.values()), audited, label

    def residue(self, it) -> None:
        """Before the first backward of iteration ``it``: the leftovers of an earlier iteration it will add to (only
        across a boundary)."""
        from gradcheck.observe.leftovers import classify_residue

        if not it.boundary:
            self.leftovers.watch()
            return
        left = self.leftovers.residue()
        if left:
            it.residue = classify_residue(left, self.book, self.names)

    def on_backward_end(self, backward: BackwardEvent, it) -> None:
        """What the backward reached: the gradients the next zero step must clear."""
        from gradcheck.tape.reachability import reachable_gradients

        tape, loss, grads = backward.tape, backward.loss, backward.grads
        with self.guard("leftovers"):
            key = _reach_key(self.arguments, tape, backward.measured)
            if key is not None and self._reached is not None and _same_key(self._reached[0], key):
                reach = self._reached[1]
            else:
                # params of another computation (an earlier unittest's, updated and left) are not this tape's
                touched = self.arguments.gradient_pointers() | {
                    getattr(g, "ptr", None) for g in tape.gradients.values()
                }
                own = {k: a for k, a in backward.measured.items() if a.grad is not None and a.grad.ptr in touched}
                reach = reachable_gradients(tape, own, lambda: self.names.names, self.arguments)
            self._reached = (key, reach) if key is not None else None
            reseeded = {loss.grad.ptr} if loss is not None and getattr(loss, "grad", None) is not None else set()
            seeded = {a.grad.ptr for a in (grads or {}) if getattr(a, "grad", None) is not None}
            self.leftovers.after_backward(backward.number, reach, reseeded, seeded, backward.measured, it.stats)

    def on_window_leave(self) -> None:
        self.leftovers.forget()  # the next audited backward starts afresh: nothing it left is judged later

    def abandon(self) -> None:
        """The driver's pass failed half-way: its zero step is not evidence."""
        self._label = None
        self.use.close()


def _reach_key(arguments, tape, measured: dict) -> tuple | None:
    """What the reachable gradients depend on, when that is all they depend on: the tape's arguments (the very
    objects, and their gradients: ``arguments.version``), what the tape keeps gradients of, the measured arrays
    and their gradients. None when a struct is passed (the records an array of structs points to can change
    without any object changing): walked afresh. A training loop's or a driver's pass passes the same ~2,400
    arrays every time, and the walk cost ~2 ms of a cartpole pass. The objects themselves are held, not their
    ids: a fresh loss array each iteration may take the last one's freed id."""
    if arguments.nested:
        return None
    arguments.plain_gradients()  # rebuilt (a new version) if a .grad was replaced since
    gradients = getattr(tape, "gradients", {})
    held = (*gradients, *gradients.values(), *measured.values(), *(a.grad for a in measured.values()))
    return arguments.version, tuple(measured), held


def _same_key(last: tuple, now: tuple) -> bool:
    """The same version and measured keys, and the very same objects (compared by identity)."""
    return last[:2] == now[:2] and len(last[2]) == len(now[2]) and all(map(is_, last[2], now[2]))
