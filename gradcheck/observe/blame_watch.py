"""``gradcheck exec --blame``: the per-launch adjoint test on an unmodified program, at its Nth backward.

``gradcheck run --blame`` re-runs a scenario's forward under a recorder; a program run by ``exec`` cannot be
asked to run its forward again, so the values each launch ran on are copied as the program makes them: while the
tape whose backward will be the Nth records (a fresh tape entered after backward N-1), every launch recorded on it
is intercepted and its array arguments copied before it runs (gradcheck.rerun.launch_record: copies only of
what changed, within the same memory budget). At backward N the copies are complete; the test itself waits until
the program has used that backward's gradients (its next recording, its next backward, or its end), because only
then does it know the params: the arrays the program updates from their gradients (an optimizer step), else the
tape's leaves. Everything runs on private copies: the program's arrays are never written.

The one difference from ``run``: no second forward, so each launch is perturbed along a random direction rather
than the program's own tangent (``run`` follows the direction fd-mismatch disagreed along).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from gradcheck.model.trace import BlameResult
from gradcheck.observe.parts import BackwardEvent, ObserverPart

if TYPE_CHECKING:
    from gradcheck.observe.cadence import AuditWindow
    from gradcheck.observe.guard import Guard


class BlameWatch:
    """Copies the launches of the tape whose backward is number ``at`` and tests them once its gradients are used."""

    def __init__(self, at: int = 1) -> None:
        self.at = at
        self.result: BlameResult | None = None
        self._recorders: dict[int, tuple[object, object]] = {}  # id(tape) → (tape, LaunchRecorder)
        self._pending = (
            None  # (recorder, grads, tape-entry verdicts, seconds) of backward ``at``, until params are known
        )
        self.why = f"--blame at backward {at}"

    @property
    def recording(self) -> bool:
        return bool(self._recorders)

    @property
    def pending(self) -> bool:
        return self._pending is not None

    def idle(self, backwards_done: int) -> bool:
        """Nothing to copy, hand on or test at the recording and backward after ``backwards_done`` backwards."""
        return (
            self._pending is None and not self._recorders and (self.result is not None or backwards_done != self.at - 1)
        )

    def on_tape_enter(self, tape, backwards_done: int) -> None:
        """A recording starts: copied when its backward may be the one to test (a fresh tape only: launches
        recorded before copying began could not be replayed)."""
        if self.result is not None or self._pending is not None or backwards_done != self.at - 1:
            return
        if id(tape) in self._recorders:
            return  # entered again: the same recording goes on
        if tape.launches:
            return
        from gradcheck.rerun.launch_record import LaunchRecorder

        self._recorders[id(tape)] = (tape, LaunchRecorder())

    def before_launch(self, call, tape) -> None:
        """A launch Warp will record on ``tape``: its arguments copied before it runs."""
        entry = self._recorders.get(id(tape))
        if entry is not None and call.recorded:
            entry[1].before(call.kernel, call.get("dim"), call.inputs, call.outputs, call.options())

    def on_backward(self, tape, loss, grads, number: int) -> None:
        """Backward ``number`` is about to run. At ``at``: the tape entries that are no launches are tested now
        (accumulation only: their gradients are restored), the launches once the params are known."""
        if self.result is not None or self._pending is not None:
            return
        if number != self.at:
            self._recorders.clear()
            return
        entry = self._recorders.pop(id(tape), None)
        self._recorders.clear()
        if entry is None:
            self.result = BlameResult(
                why=self.why,
                skipped=f"the tape of backward {number} was not recorded from its start after backward "
                f"{number - 1} (a tape reused without reset(), or recorded before): give another --blame-at",
            )
            return
        recorder = entry[1]
        from gradcheck.rerun.launch_record import note_copies

        note_copies(recorder, tape)
        recorder.loss_id = id(loss) if loss is not None else None
        started = time.perf_counter()
        from gradcheck.rerun.launch_check import check_recorded_functions

        functions = check_recorded_functions(tape, recorder.functions)
        self._pending = (recorder, grads, functions, time.perf_counter() - started)

    def settle(self, params) -> None:
        """The gradients of backward ``at`` have been used (or the program ended): test its launches, on the
        gradient path from ``params`` (the arrays updated from their gradients; None: the tape's leaves)."""
        if self._pending is None:
            return
        recorder, grads, functions, spent = self._pending
        self._pending = None
        started = time.perf_counter()
        from gradcheck.model.options import FDOptions
        from gradcheck.rerun.launch_check import COPY_BUDGET_BYTES, check_launches

        trained = bool(params)  # the program updates params from their gradients (else: the leaves)
        if not params:
            params = recording_leaves(recorder)
        if recorder.loss_id is None and grads:  # backward(grads={array: seed}): the seeded arrays are the outputs
            recorder.seeds = tuple(grads)
        from gradcheck.warp_compat.runtime import no_active_tape

        with no_active_tape():  # the replays' own copies and launches are never the program's recording
            verdicts = [replace(v, trained=trained) for v in check_launches(recorder, list(params), FDOptions())]
        note = None
        if recorder.over_budget_at is not None:
            note = (
                f"copies of forward values over {COPY_BUDGET_BYTES >> 20} MiB from launch #{recorder.over_budget_at} "
                "on: later launches not checked"
            )
        seconds = spent + time.perf_counter() - started
        self.result = BlameResult(tuple(verdicts) + tuple(functions), self.why, None, note, seconds)

    def failed(self, why: str) -> None:
        self._pending, self._recorders = None, {}
        self.result = BlameResult(why=self.why, skipped=why)


def recording_leaves(recorder) -> list:
    """The recording's leaves: arrays with gradients that a launch reads before any launch writes them."""
    written, found = set(), {}
    for launch in recorder.launches:
        for array in launch.arrays_in:
            if id(array) not in written and getattr(array, "requires_grad", False):
                found.setdefault(id(array), array)
        written |= launch.writes
    return list(found.values())


class BlameHooks(ObserverPart):
    """The observer's part for the per-launch adjoint tests (``exec``'s default test and ``--blame``): the program's
    recordings and backwards handed to ``tests`` (a gradcheck.observe.launch_tests.LaunchTests), the launch switch
    the audit window turned off put on while a recording is copied, and the tests settled once the tested
    backward's gradients are used (``params()``: the arrays the program updated, on whose path they test)."""

    def __init__(self, tests, guard: Guard, window: AuditWindow, params: Callable[[], list]) -> None:
        self.tests, self.guard, self.window, self._params = tests, guard, window, params
        self.idle = tests.idle  # asked before every backward of a long run: the tests' own answer, one call

    @property
    def recording(self) -> bool:
        """A recording whose launches are copied is under way: every launch must reach before_launch."""
        return self.tests.recording

    @property
    def result(self):
        return self.tests.result

    def before_launch(self, call, tape) -> None:
        with self.guard("blame"):
            self.tests.before_launch(call, tape)

    def idle(self, backwards: int) -> bool:  # bound to the tests' own in __init__ (one call, not two)
        return self.tests.idle(backwards)

    def on_tape_enter(self, tape, backwards: int) -> None:  # told only when not idle (observe.parts)
        self.settle()
        with self.guard("blame", quiet=False):  # bookkeeping on every recording of a long run (a recorder at most)
            self.tests.on_tape_enter(tape, backwards)
        if self.tests.recording and self.window.light:
            self.window.launches(True)  # the cadence skips this backward, the launches of its recording are copied

    def on_backward_begin(self, backward: BackwardEvent) -> None:  # told only when not idle (observe.parts)
        self.settle()
        with self.guard("blame", quiet=False):  # on every backward: hands a recording on (copies, no kernel of its own)
            self.tests.on_backward(backward.tape, backward.loss, backward.grads, backward.number)
        if self.window.light:
            self.window.launches(False)

    def on_finish(self) -> None:
        self.settle()

    def settle(self) -> None:
        """The tested backwards' gradients have been used: their launches are tested on the path from the params the
        program updated (none seen: the recording's leaves). Each test guards itself (observe.launch_tests)."""
        if not self.tests.pending:
            return
        from gradcheck.warp_compat.runtime import quiet

        with self.guard.ignoring(), quiet():
            self.tests.settle(self._params())
