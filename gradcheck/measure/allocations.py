"""A ledger of Warp allocations and frees, so a pointer can be judged live, freed, or reused.

Struct mirrors and array-of-structs records hold raw device pointers. Whether such a pointer is
still valid cannot be read off the pointer: a freed gradient buffer's address is often handed to
the very next allocation of the same size (measured: the next ``wp.zeros(64)`` got it), so
"inside some live allocation" is not enough. While installed, the ledger wraps the allocate and
deallocate methods of every Warp device allocator and remembers each live block (pointer, size,
sequence number) and each freed block, so the audit can tell "never seen", "freed while we
watched" and "freed, then handed to a newer array".
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from gradcheck.warp_compat import device_allocators, wrap_allocator


@dataclass(frozen=True)
class Block:
    ptr: int
    size: int
    seq: int  # allocation order while the ledger was installed (0: freed, order unknown)


class AllocationLedger:
    """``quarantine=True`` keeps freed blocks allocated until ``uninstall()`` (like ASan's quarantine):
    a dangling pointer then keeps pointing at memory nobody else gets, which makes use-after-free
    writes observable (and harmless) while investigating.

    Newton's Featherstone forward allocates ~3,400 blocks per 100-step pass, so the wrappers keep
    plain ints in dicts (no objects the cyclic GC would track); Blocks are built only on query.
    """

    def __init__(self, quarantine: bool = False):
        self.quarantine = quarantine
        self._held: list[tuple[object, int, int]] = []  # (real deallocate, ptr, size) released on uninstall
        self._size: dict[int, int] = {}  # live ptr → size
        self._seq_of: dict[int, int] = {}  # live ptr → allocation sequence number
        self._freed: dict[int, int] = {}  # freed ptr → size (most recent free at that address)
        self._seq = 0
        self._restore: list = []  # one function per wrapped allocator that unwraps it
        self._sorted: list[int] | None = None
        self.active = False

    # -- installation -------------------------------------------------------------------------
    def install(self) -> AllocationLedger:
        """Wrap every device's allocators, now if Warp is initialised, else when the program initialises it
        (gradcheck never initialises Warp on a program's behalf: allocators exist only from then on anyway)."""
        from gradcheck.measure import liveness
        from gradcheck.warp_compat.runtime import when_initialised

        self.active = True
        self._restore.append(when_initialised(self._wrap_allocators))
        liveness.use_ledger(self)
        return self

    def _wrap_allocators(self) -> None:
        import warp as wp

        if not self.active:
            return
        for device in wp.get_devices():
            for allocator in device_allocators(device):
                restore = wrap_allocator(allocator, self._tracked, marker=self)  # None: wrapped already
                if restore is not None:
                    self._restore.append(restore)

    def uninstall(self) -> None:
        """Restore the allocators. Arrays allocated meanwhile keep calling the wrapper, which then only frees."""
        from gradcheck.measure import liveness

        if liveness._current is self:
            liveness.use_ledger(None)
        for restore in self._restore:
            restore()
        self._restore.clear()
        self.active = False
        held, self._held = self._held, []
        for deallocate, ptr, size in held:
            deallocate(ptr, size)

    def __enter__(self) -> AllocationLedger:
        return self.install()

    def __exit__(self, *exc) -> None:
        self.uninstall()

    def _tracked(self, allocate, deallocate):
        """The recording versions of one allocator's allocate and deallocate."""
        ledger, sizes, seqs, freed = self, self._size, self._seq_of, self._freed

        def tracked_allocate(size_in_bytes):
            ptr = allocate(size_in_bytes)
            if ptr and ledger.active:
                ledger._seq += 1
                sizes[ptr] = size_in_bytes
                seqs[ptr] = ledger._seq
                freed.pop(ptr, None)
                ledger._sorted = None
            return ptr

        def tracked_deallocate(ptr, size_in_bytes):
            if ptr and ledger.active:
                sizes.pop(ptr, None)
                seqs.pop(ptr, None)
                freed[ptr] = size_in_bytes
                ledger._sorted = None
                if ledger.quarantine:
                    ledger._held.append((deallocate, ptr, size_in_bytes))
                    return None
            return deallocate(ptr, size_in_bytes)

        return tracked_allocate, tracked_deallocate

    # -- queries ------------------------------------------------------------------------------
    @property
    def allocations(self) -> int:
        """How many allocations the ledger has seen: a cache of names stays valid while this does not move."""
        return self._seq

    def block_at(self, ptr: int) -> Block | None:
        """The live block containing ``ptr`` (allocated while the ledger watched), or None."""
        if not ptr:
            return None
        start = ptr if ptr in self._size else None
        if start is None:
            if self._sorted is None:
                self._sorted = sorted(self._size)
            i = bisect.bisect_right(self._sorted, ptr) - 1
            if i >= 0 and ptr < self._sorted[i] + max(self._size[self._sorted[i]], 1):
                start = self._sorted[i]
        if start is None:
            return None
        return Block(start, self._size[start], self._seq_of.get(start, 0))

    def freed_at(self, ptr: int) -> Block | None:
        """A block freed while the ledger watched that contained ``ptr`` and is not live again."""
        if not ptr:
            return None
        size = self._freed.get(ptr)
        if size is not None:
            return Block(ptr, size, 0)
        for start, size in self._freed.items():  # interior pointers are rare: a linear scan is fine
            if start <= ptr < start + max(size, 1):
                return Block(start, size, 0)
        return None
