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

from gradcheck.measure.liveness import readable_fingerprint
from gradcheck.model.sites import short_site
from gradcheck.model.trace import ChangedInput

MAX_READERS = 3  # launches named per array in the finding
MAX_TESTED = 16  # launches per array whose adjoint is tested for using its values (more readers: not tested)


class InputWatch:
    """Open while a tape records: ``after_launch`` after each recorded launch, ``close`` when recording ends,
    ``check`` when its backward starts."""

    def __init__(self) -> None:
        self.arrays: dict[int, tuple[object, int | None, int]] = {}  # id → (array, fingerprint, first reader index)
        self.readers: dict[int, list[str]] = {}
        self.reader_indices: dict[int, list[int]] = {}  # tape positions of the launches that read it (first few)
        self.counts: dict[int, int] = {}
        self.changed: list[tuple[object, tuple[str, ...], int, int]] = []
        self.checked = False
        self._tape = None
        self._seen: set[int] = set()  # tape positions after_launch saw (close() reads the others)

    def after_launch(self, tape, call, arguments) -> None:
        """A launch was just recorded on ``tape``: what it read, fingerprinted now (first reader only)."""
        from gradcheck.tape.launch_access import call_access

        self._tape = tape
        index = len(tape.launches) - 1
        self._seen.add(index)
        for array in _read_inputs(call_access(call)):
            key = id(array)
            if key not in self.arrays:
                self.arrays[key] = (array, readable_fingerprint(array), index)
            self._note_reader(key, index, call.kernel.key, call.site)

    def close(self, tape) -> None:
        """Recording ended: arrays read by launches the watch did not see are fingerprinted now."""
        from gradcheck.tape.launch_access import recorded_accesses
        from gradcheck.warp_compat import launch_sites, tape_launches

        self._tape = tape
        launches = tape_launches(tape)
        if len(self._seen) == len(launches):
            return  # every launch was seen as it ran (the common case): no access is built again
        sites = launch_sites(launches)
        for access in recorded_accesses(launches, skip=self._seen):
            if access.kind != "launch":
                continue
            for array in _read_inputs(access):
                key = id(array)
                if key not in self.arrays:
                    self.arrays[key] = (array, readable_fingerprint(array), access.index)
                self._note_reader(key, access.index, access.what, sites.get(access.index))

    def _note_reader(self, key: int, index: int, kernel: str, where: str | None) -> None:
        self.counts[key] = self.counts.get(key, 0) + 1
        indices = self.reader_indices.setdefault(key, [])
        if len(indices) < MAX_TESTED:
            indices.append(index)
        names = self.readers.setdefault(key, [])
        if len(names) < MAX_READERS:
            place = f" ({short_site(where)})" if where else ""
            names.append(f"launch #{index} {kernel}{place}")

    def check(self) -> None:
        """At the start of tape.backward: which watched arrays changed since their first reader ran."""
        if self.checked:  # several tape.backward calls in one backward(): the first one is what matters
            return
        self.checked = True
        writes = None
        for key, (array, before, first) in self.arrays.items():
            now = readable_fingerprint(array) if before is not None else None  # None: memory the program may have freed
            if now is None or now == before:
                continue
            if writes is None:
                writes = _writes(self._tape) if self._tape is not None else []
            if _written_after(writes, array, first):
                continue  # a later launch on the tape wrote it (through a view too): write-after-read's
            if self._harmless(key, array):
                continue
            self.changed.append((array, tuple(self.readers[key]), self.counts[key], first))

    def _harmless(self, key: int, array) -> bool:
        """Every launch that read it has an adjoint that does not use its values (it enters additively, as an
        external force refreshed every step does): backward replays them with the new values and gets the same
        gradient. Tested on private copies (gradcheck.rerun.adjoint_dependence); a reader it cannot test, or more
        readers than were noted, keeps the finding."""
        from gradcheck.rerun.adjoint_dependence import adjoint_reads
        from gradcheck.warp_compat import recorded_call

        if self._tape is None or self.counts.get(key, 0) > len(self.reader_indices.get(key, ())):
            return False
        launches = self._tape.launches
        for index in self.reader_indices.get(key, ()):
            entry = launches[index] if index < len(launches) else None
            if entry.__class__ is not list:
                return False
            call = recorded_call(entry)
            labels = [label for label, value in call.arguments() if value is array]
            if not labels or any(adjoint_reads(call, label) is not False for label in labels):
                return False
        return True

    def results(self, name_of) -> tuple[ChangedInput, ...]:
        return tuple(
            ChangedInput(name_of(array), readers, count, first) for array, readers, count, first in self.changed
        )


def _read_inputs(access) -> list:
    """The arrays a launch was handed in ``inputs=`` whose values its code may load: what backward will read again
    (an array it only stores into, accumulates into or takes the shape of is not read)."""
    return [array for use in access.arguments if use.role.reads and not use.role.output for array in use.arrays]


def _writes(tape) -> list[tuple[int, int, int]]:
    """(tape position, start, end) of every byte span a recorded launch or copy may write (``may_write``: kernel
    outputs, inputs a kernel's code may store into, every argument of a kernel whose code cannot be read, copy
    destinations). Never missing one: a recorded write missed here would be reported as a change beside the tape."""
    from gradcheck.tape.launch_access import recorded_accesses
    from gradcheck.warp_compat import byte_extent, tape_launches

    return [
        (access.index, *byte_extent(array))
        for access in recorded_accesses(tape_launches(tape))
        for array in access.arrays("may_write")
    ]


def _written_after(writes: list, array, first: int) -> bool:
    """A span written at a tape position after ``first`` overlaps the array's memory (a write through a view of it,
    ``traj[t + 1]``, counts)."""
    from gradcheck.warp_compat import byte_extent

    start, end = byte_extent(array)
    return any(index > first and lo < end and start < hi for index, lo, hi in writes)


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
