"""Arrays a recorded launch read that change, outside the tape's own launches, before ``tape.backward`` runs.

Backward replays every launch with the values its arrays hold *when backward runs*, not the values the launch
read: Warp keeps references, not copies (NVIDIA/warp#1350 asks for PyTorch's version counters). An array written
outside kernels after the launch that read it — a numpy write through a CPU view, ``assign``, ``fill_``, a
``wp.copy`` the tape did not record, a param normalised in place before ``tape.backward`` — makes backward
differentiate a function the forward never evaluated, silently.

Each array a recorded launch reads is fingerprinted right after that launch (the first launch of the recording that
reads it: the value backward must see), and again when ``tape.backward`` starts; an array whose values differ, and
that no later launch on the tape wrote (a later recorded launch rewriting it is write-after-read's business, and
backward replays that launch too), is named with the launch whose input it was. Arrays the watch did not see a
launch read (launches recorded before it was installed) are fingerprinted when the recording ends, as before.
Only the audited backwards are watched (gradcheck.observe.cadence), the first pass under ``gradcheck run``.
"""

from __future__ import annotations

import os

from gradcheck.model.trace import ChangedInput

MAX_READERS = 3  # launches named per array in the finding


class InputWatch:
    """Open while a tape records: ``after_launch`` after each recorded launch, ``close`` when recording ends,
    ``check`` when its backward starts."""

    def __init__(self) -> None:
        self.arrays: dict[int, tuple[object, int | None, int]] = {}  # id → (array, fingerprint, first reader index)
        self.readers: dict[int, list[str]] = {}
        self.counts: dict[int, int] = {}
        self.changed: list[tuple[object, tuple[str, ...], int, int]] = []
        self.checked = False
        self._tape = None

    def after_launch(self, tape, call, arguments) -> None:
        """A launch was just recorded on ``tape``: what it read, fingerprinted now (first reader only)."""
        from gradcheck.probes.replay_probe import arrays_of
        from gradcheck.probes.warp_compat import argument_access, array_class

        self._tape = tape
        index = len(tape.launches) - 1
        access = argument_access(call.kernel)
        array_type = array_class()
        inputs = len(call.inputs)
        for position, (label, value) in enumerate(arguments):
            if position >= inputs or not access.reads_value(label):
                continue
            for array in arrays_of(value, array_type):
                key = id(array)
                if key not in self.arrays:
                    self.arrays[key] = (array, fingerprint(array), index)
                self._note_reader(key, index, call.kernel.key, call.site)

    def close(self, tape) -> None:
        """Recording ended: arrays read by launches the watch did not see are fingerprinted now."""
        from gradcheck.probes.replay_probe import arrays_of
        from gradcheck.probes.warp_compat import array_class, launch_reads, tape_launches

        self._tape = tape
        array_type = array_class()
        seen = {i for _a, _f, i in self.arrays.values()}
        for index, kernel, inputs, where in launch_reads(tape_launches(tape)):
            if index in seen:
                continue
            for value in inputs:
                for array in arrays_of(value, array_type):
                    key = id(array)
                    if key not in self.arrays:
                        self.arrays[key] = (array, fingerprint(array), index)
                    self._note_reader(key, index, kernel.key, where)

    def _note_reader(self, key: int, index: int, kernel: str, where: str | None) -> None:
        self.counts[key] = self.counts.get(key, 0) + 1
        names = self.readers.setdefault(key, [])
        if len(names) < MAX_READERS:
            place = f" ({os.path.basename(where.split(':')[0])}:{where.rsplit(':', 1)[1]})" if where else ""
            names.append(f"launch #{index} {kernel}{place}")

    def check(self) -> None:
        """At the start of tape.backward: which watched arrays changed since their first reader ran."""
        if self.checked:  # several tape.backward calls in one backward(): the first one is what matters
            return
        self.checked = True
        rewritten = _last_writes(self._tape) if self._tape is not None else {}
        for key, (array, before, first) in self.arrays.items():
            if before is None or rewritten.get(getattr(array, "ptr", None), -1) > first:
                continue  # unreadable memory, or a later launch on the tape wrote it (write-after-read)
            now = fingerprint(array)
            if now is not None and now != before:
                self.changed.append((array, tuple(self.readers[key]), self.counts[key], first))

    def results(self, name_of) -> tuple[ChangedInput, ...]:
        return tuple(
            ChangedInput(name_of(array), readers, count, first) for array, readers, count, first in self.changed
        )


def fingerprint(array) -> int | None:
    """A CRC of the array's values; None for memory the program may have freed (never read: "not checked")."""
    from gradcheck.probes.liveness import readable
    from gradcheck.probes.replay_probe import fingerprint as crc

    if hasattr(array, "ptr") and not readable(array):
        return None
    return crc(array)


def _last_writes(tape) -> dict[int, int]:
    """data pointer → the last tape position that writes it (kernel outputs, inputs a kernel stores into, copies)."""
    from gradcheck.probes.flow_graph import copied
    from gradcheck.probes.replay_probe import arrays_of
    from gradcheck.probes.warp_compat import (
        argument_access,
        array_class,
        kernel_argument_names,
        launch_io,
        tape_launches,
    )

    array_type = array_class()
    last: dict[int, int] = {}
    launches = tape_launches(tape)
    for index, kernel, inputs, outputs in launch_io(launches):
        access = argument_access(kernel)
        labels = kernel_argument_names(kernel)
        for position, value in enumerate([*inputs, *outputs]):
            label = labels[position] if position < len(labels) else ""
            if position >= len(inputs) or access.writes_to(label):
                for array in arrays_of(value, array_type):
                    last[array.ptr] = index
    for index, entry in enumerate(launches):
        pair = copied(entry) if entry.__class__ is not list else None
        if pair is not None and getattr(pair[0], "ptr", None):
            last[pair[0].ptr] = index
    return last


class InputWatches:
    """The watches of a program's recordings: one per tape while it records, kept after it until its backward
    (a few at most: a program that records many tapes and differentiates none keeps the latest four)."""

    def __init__(self) -> None:
        self.recording: dict[int, InputWatch] = {}  # id(tape) → the watch of a tape still recording
        self._waiting: dict[int, tuple[object, InputWatch]] = {}  # id(tape) → (tape, watch) whose backward is to come

    def enter(self, tape) -> None:
        self.recording[id(tape)] = InputWatch()

    def clear(self) -> None:
        """The audited window ends: the watches of its recordings end with it."""
        self.recording.clear()
        self._waiting.clear()

    def exit(self, tape, watch_inputs: bool) -> None:
        """Recording ended (a tape entered while the observer was light gets its whole watch now)."""
        watch = self.recording.pop(id(tape), None)
        if watch is None and watch_inputs:
            watch = InputWatch()
        if watch is None:
            return
        watch.close(tape)
        if len(self._waiting) >= 4:
            self._waiting.pop(next(iter(self._waiting)))
        self._waiting[id(tape)] = (tape, watch)

    def changed(self, tape, name_of) -> tuple[ChangedInput, ...] | None:
        """At tape.backward: what changed since its launches read it (None: the tape was not watched)."""
        entry = self._waiting.pop(id(tape), None)
        if entry is None:
            return None
        entry[1].check()
        return entry[1].results(name_of)
