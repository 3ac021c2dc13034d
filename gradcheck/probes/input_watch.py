"""Arrays a recorded launch read that change after forward() and before ``tape.backward`` runs.

Backward replays every launch with the values its arrays hold *when backward runs*, not the values the
forward saw: Warp keeps references, not copies (NVIDIA/warp#1350 asks for PyTorch's version counters). A
scenario's own backward code that normalises params in place, writes a numpy view, ``assign``s a new start
state or refreshes a buffer before calling ``tape.backward`` silently differentiates another function.

The watch fingerprints every array the tape's launches were given to read (struct fields included) when
forward() returns, and again when ``tape.backward`` starts; the arrays whose values differ are named with
the launches that read them. Two CRCs per array, on the first pass only.
"""

from __future__ import annotations

import os

from gradcheck.model.trace import ChangedInput

MAX_READERS = 3  # launches named per array in the finding


class InputWatch:
    def __init__(self, tape):
        from gradcheck.probes.replay_probe import arrays_of, fingerprint
        from gradcheck.probes.warp_compat import array_class, launch_reads, tape_launches

        array_type = array_class()
        self.arrays: dict[int, tuple[object, int]] = {}  # id → (array, fingerprint when forward() returned)
        self.readers: dict[int, list[str]] = {}
        self.counts: dict[int, int] = {}
        for index, kernel, inputs, where in launch_reads(tape_launches(tape)):
            for value in inputs:
                for array in arrays_of(value, array_type):
                    key = id(array)
                    if key not in self.arrays:
                        self.arrays[key] = (array, fingerprint(array))
                    self.counts[key] = self.counts.get(key, 0) + 1
                    names = self.readers.setdefault(key, [])
                    if len(names) < MAX_READERS:
                        place = f" ({os.path.basename(where.split(':')[0])}:{where.rsplit(':', 1)[1]})" if where else ""
                        names.append(f"launch #{index} {kernel.key}{place}")
        self.changed: list[tuple[object, tuple[str, ...], int]] = []
        self.checked = False

    def check(self) -> None:
        """At the start of tape.backward: which watched arrays changed since forward() returned."""
        from gradcheck.probes.replay_probe import fingerprint

        if self.checked:  # several tape.backward calls in one backward(): the first one is what matters
            return
        self.checked = True
        for key, (array, before) in self.arrays.items():
            if fingerprint(array) != before:
                self.changed.append((array, tuple(self.readers[key]), self.counts[key]))

    def results(self, name_of) -> tuple[ChangedInput, ...]:
        return tuple(ChangedInput(name_of(array), readers, count) for array, readers, count in self.changed)
