"""What moved values between arrays without the tape knowing: where a gradient chain can break unseen.

The tape lists what backward will differentiate. Values also move in ways it never lists, and a gradient that
should flow along them stops there: a launch made before ``with tape:`` (or after it, or with
``record_tape=False``), a ``wp.copy`` Warp did not record (it records one only while a tape records and both
arrays have gradients), a read to the host (``.numpy()``) whose values come back as a new array. The observer
notes each of them here while it watches (the audited iterations), by data pointer only: an array is never kept
alive nor read through this log, so an event about memory the program has since freed is harmless.

The log is bounded (the most recent ``LIMIT`` events) and starts afresh after each audited backward: what a
backward's chain could have passed through happened since the last one.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

LIMIT = 4096


@dataclass(frozen=True)
class Unrecorded:
    """One movement of values the tape does not hold."""

    kind: str  # "launch" | "copy" | "host-read"
    what: str  # the kernel's key, "wp.copy", or "numpy()"
    site: str | None  # file:line of the program's call
    reads: tuple[int, ...]  # data pointers read
    writes: tuple[int, ...]  # data pointers written
    why: str  # why the tape does not hold it
    labels: tuple[tuple[int, str], ...] = ()  # data pointer written → argument name (``kernel.argument``)
    tape: int | None = None  # which recording was the last one entered when it happened (a count, not an id)
    at: int = 0  # how many launches that tape held then: the event came after those


class UnrecordedLog:
    """Events since the last audited backward, each placed in time against the tape last entered (its launch
    count then)."""

    def __init__(self) -> None:
        self.events: deque[Unrecorded] = deque(maxlen=LIMIT)
        self._tape = None  # a weak reference: the log never keeps a program's tape alive
        self._entered = 0  # recordings entered so far

    def entered(self, tape) -> None:
        import weakref

        self._tape = weakref.ref(tape)
        self._entered += 1

    def recording_of(self, tape) -> int | None:
        """The number events carry for ``tape``'s recording, if it is the last one entered (ids are reused)."""
        last = self._tape() if self._tape is not None else None
        return self._entered if last is tape and tape is not None else None

    def _when(self) -> dict:
        tape = self._tape() if self._tape is not None else None
        return {"tape": self._entered, "at": len(tape.launches)} if tape is not None else {}

    def clear(self) -> None:
        self.events.clear()

    def launch(self, call, arguments, why: str) -> None:
        """A launch no tape records: what it may read → what it may write (gradcheck.tape.launch_access's
        ``carried_from``, the rule the recorded launches of gradcheck.tape.flow_graph follow too). ``arguments``
        (the call's, by name) are the ones the access holds."""
        from gradcheck.tape.launch_access import call_access

        access = call_access(call)
        reads, writes = access.carried_from()
        if not reads or not writes:
            return
        key = access.what
        # what it writes is named after the argument (the walk knows no other name for it)
        labels = [
            (a.ptr, f"{key}.{use.role.name}") for use in access.arguments if use.role.may_write for a in use.arrays
        ]
        self.events.append(
            Unrecorded(
                "launch",
                key,
                call.site,
                tuple(a.ptr for a in reads),
                tuple(a.ptr for a in writes),
                why,
                tuple(labels),
                **self._when(),
            )
        )

    def copy(self, dest, src, site: str | None, why: str, inside_warp: bool = False) -> None:
        """``inside_warp``: Warp's own code made it (``wp.array(values)``, ``assign``, ``clone``), not a wp.copy of
        the program's."""
        what = "a copy inside Warp (wp.array, assign or clone)" if inside_warp else "wp.copy"
        self.events.append(Unrecorded("copy", what, site, (src.ptr,), (dest.ptr,), why, **self._when()))

    def host_read(self, array, site: str | None) -> None:
        self.events.append(
            Unrecorded("host-read", "numpy()", site, (array.ptr,), (), "values left the device", **self._when())
        )


def copy_unrecorded(dest, src, recording: bool) -> str | None:
    """Why Warp will not record ``wp.copy(dest, src)`` on the tape, or None when it will (warp.copy records the
    adjoint copy only when a tape records and both arrays have a ``.grad``)."""
    if not recording:
        return "no tape was recording"
    if getattr(src, "grad", None) is None:
        return "the source has no .grad"
    if getattr(dest, "grad", None) is None:
        return "the destination has no .grad"
    return None
