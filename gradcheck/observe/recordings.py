"""The program's recordings (``with tape:``) as the observer watches them: what a recording rewrote after a launch
read it (write-after-read, observe.rewrites), what it read that changes before its backward (observe.input_watch),
the kernels it launched that were built without a backward, and its launch arguments (tape.tape_arguments).

Write-after-read costs a fingerprint per launch argument, so it is watched on the first recording, on a recording
whose launches differ from the last one's, and on the 16th, 32nd, 64th, ... after that (a mistake in a loop that
records the same launches each time shows on the first; under ``gradcheck run``, whose passes repeat one forward
at the same params, only the first and changed ones). What each recording read is fingerprinted on every
recording, or under ``gradcheck run`` on the first pass only (every pass runs the same forward:
``ObserverConfig.watch_inputs``).
"""

from __future__ import annotations

import weakref

from gradcheck.observe import values
from gradcheck.observe.input_watch import InputWatches
from gradcheck.observe.parts import ObserverPart, PartContext
from gradcheck.observe.rewrites import RewriteWatch


class Recordings(ObserverPart):
    """The observer's part for recordings: ``entered``/``exited`` around each audited one, ``watches`` for each
    launch, ``take_hazards`` and ``changed`` before the backward; ``arguments``: the observer's TapeArguments."""

    def __init__(self, context: PartContext, arguments) -> None:
        self.names, self.arguments = context.names, arguments
        self.first_pass_only = context.config.watch_inputs == "first"
        self.watch_inputs = True  # fingerprint what this recording reads (changed-before-backward)
        self.inputs = InputWatches()  # what each recording read, fingerprinted at launch time
        self.no_backward_kernels: set[str] = set()
        self._count = 0
        self._structure_changed = True
        self._wars: dict[int, RewriteWatch] = {}
        self._hazards: tuple = ((), ())  # the last watched recording's (hazards, harmless rewrites)
        self._recorded = weakref.WeakSet()  # tapes that recorded a computation (a reset() empties them first)

    def pass_begins(self, index: int) -> None:
        """A driver's pass ``index`` starts (``gradcheck run``): its inputs watched or not."""
        if self.first_pass_only:
            self.watch_inputs = index == 1

    def entered(self, tape) -> None:
        """An audited recording starts."""
        if self.watch_inputs:
            self.inputs.enter(tape)
        self._count += 1
        n = self._count
        again = not self.first_pass_only and n >= 16 and n & (n - 1) == 0  # run's passes repeat one forward
        if n == 1 or self._structure_changed or again:
            self._wars[id(tape)] = RewriteWatch(values.fingerprint)

    def exited(self, tape) -> None:
        """An audited recording ended: its launches' arguments, the kernels without a backward, its hazards."""
        from gradcheck.warp_compat import backward_disabled, kernel_launches, tape_launches

        self._recorded.add(tape)
        new = not self.arguments.update(tape)
        # changed from the last recording's (the first recording has nothing to differ from)
        self._structure_changed = new and self._count > 1
        if new:
            self.no_backward_kernels |= {
                k.key for _, k, _ in kernel_launches(tape_launches(tape)) if backward_disabled(k)
            }
        watch = self._wars.pop(id(tape), None)
        if watch is not None:
            self.names.tape = tape
            self._hazards = watch.results(self.names.label)
        self.inputs.exit(tape, self.watch_inputs)

    def watches(self, recording) -> tuple:
        """(write-after-read watch, input watch) of the recording a launch goes to, each None when not watched."""
        tape_watch = self._wars.get(id(recording)) if recording is not None and self._wars else None
        inputs = self.inputs.recording.get(id(recording)) if self.inputs.recording else None
        return tape_watch, inputs

    def found_hazards(self, hazards: tuple) -> None:
        """A captured forward replayed from copies (observe.graphs): its write-after-read."""
        self._hazards = hazards

    def take_hazards(self) -> tuple:
        """(hazards, harmless rewrites) found since the last backward, for this one's iteration."""
        hazards, self._hazards = self._hazards, ((), ())
        return hazards

    def changed(self, tape) -> tuple:
        """What ``tape``'s recording read that changed since (changed-before-backward)."""
        return self.inputs.changed(tape, self.names.label) or ()

    def recorded(self, tape) -> bool:
        """``tape`` recorded a computation while watched."""
        return tape in self._recorded

    def on_window_leave(self) -> None:
        self.inputs.clear()
        self._wars.clear()
