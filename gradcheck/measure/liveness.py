"""Whether gradcheck may read an array it kept from an earlier moment: never memory the program may have freed.

The observer keeps arrays across a program's steps (a param's gradient from one backward to the next, the
leftovers of a zero step, a gradient until the next host read). An array that owns its memory (``deleter``) or
holds what does (``_ref``: a view's parent, a NumPy array, a CUDA-array-interface object; ``_tensor``: a torch
tensor) stays readable as long as gradcheck holds it. An array built on a bare pointer (``wp.array(ptr=...)``)
holds nothing: its owner can be freed at any moment, and reading it then is a use-after-free (garbage on the CPU,
a crash on a GPU). Such an array is read only while the allocation it was first seen in, per the allocation
ledger, is still the same live block; memory the ledger never saw allocated (another library's) is not read at
all: the checks that would need it say "not checked" instead.
"""

from __future__ import annotations

_current = None  # the installed AllocationLedger (one at a time: gradcheck run, exec, audit())


def use_ledger(ledger) -> None:
    """The ledger of the run starting now (or None when it ends); what was first seen under another is forgotten."""
    global _current
    _current = ledger
    LIVENESS.__init__()


def holds_its_memory(array) -> bool:
    """Whether ``array`` keeps the memory it points at alive (so holding the array is enough)."""
    seen = 0
    while array is not None and seen < 64:
        if getattr(array, "deleter", None) is not None or getattr(array, "_tensor", None) is not None:
            return True
        parent = getattr(array, "_ref", None)
        if parent is None:
            return False
        if not hasattr(parent, "ptr") or not hasattr(parent, "deleter"):
            return True  # a NumPy array, a CUDA-array-interface object: the data's owner itself
        array, seen = parent, seen + 1
    return False


class Liveness:
    """Blocks of memory first seen under each bare-pointer array, so a later read can tell "same allocation"
    from "freed, and perhaps handed to someone else"."""

    def __init__(self) -> None:
        self._first: dict[int, tuple[object, int | None]] = {}  # id(array) → (array, ledger seq when first seen)
        self.refused = 0  # reads refused: the checks that needed them did not run on those arrays

    def readable(self, array) -> bool:
        if array is None or getattr(array, "ptr", None) is None:
            return array is not None and getattr(array, "size", 0) == 0
        if holds_its_memory(array):
            return True
        ledger = _current
        block = ledger.block_at(array.ptr) if ledger is not None and ledger.active else None
        seq = block.seq if block is not None else None
        entry = self._first.get(id(array))
        if entry is None or entry[0] is not array:
            if len(self._first) > 4096:
                self._first.clear()
            self._first[id(array)] = (array, seq)
            entry = (array, seq)
        ok = seq is not None and entry[1] == seq
        if not ok:
            self.refused += 1
        return ok


LIVENESS = Liveness()


def readable(array) -> bool:
    """Whether ``array``'s memory may be read now (see the module's docstring)."""
    return LIVENESS.readable(array)


def readable_fingerprint(array) -> int | None:
    """A CRC of the array's values (gradcheck.measure.fingerprints.fingerprint); None for memory the program may have
    freed, which is never read: whoever compares fingerprints treats None as "not checked", never as "changed"."""
    from gradcheck.measure.fingerprints import fingerprint

    if hasattr(array, "ptr") and not readable(array):
        return None
    return fingerprint(array)
