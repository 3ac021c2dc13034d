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


@dataclass(frozen=True)
class Block:
    ptr: int
    size: int
    seq: int  # allocation order while the ledger was installed
    device: str

    def contains(self, ptr: int) -> bool:
        return self.ptr <= ptr < self.ptr + max(self.size, 1)


class AllocationLedger:
    """``quarantine=True`` keeps freed blocks allocated until ``uninstall()`` (like ASan's quarantine):
    a dangling pointer then keeps pointing at memory nobody else gets, which makes use-after-free
    writes observable (and harmless) while investigating."""

    def __init__(self, quarantine: bool = False):
        self.quarantine = quarantine
        self._held: list[tuple[object, int, int]] = []  # (real deallocate, ptr, size) released on uninstall
        self.live: dict[int, Block] = {}
        self.freed: dict[int, Block] = {}  # most recent freed block starting at each address
        self._seq = 0
        self._patched: list[tuple[object, dict]] = []
        self._sorted: list[int] | None = None
        self.active = False

    # -- installation -------------------------------------------------------------------------
    def install(self) -> AllocationLedger:
        import warp as wp

        for device in wp.get_devices():
            for allocator in _allocators(device):
                if any(a is allocator for a, _ in self._patched) or getattr(allocator, "_gradcheck_ledger", None):
                    continue
                saved = {k: allocator.__dict__[k] for k in ("allocate", "deallocate") if k in allocator.__dict__}
                self._wrap(allocator, str(device))
                self._patched.append((allocator, saved))
        self.active = True
        return self

    def uninstall(self) -> None:
        """Restore the allocators. Arrays allocated meanwhile keep calling the wrapper, which then only frees."""
        for allocator, saved in self._patched:
            for key in ("allocate", "deallocate", "_gradcheck_ledger"):
                allocator.__dict__.pop(key, None)
            allocator.__dict__.update(saved)
        self._patched.clear()
        self.active = False
        held, self._held = self._held, []
        for deallocate, ptr, size in held:
            deallocate(ptr, size)

    def __enter__(self) -> AllocationLedger:
        return self.install()

    def __exit__(self, *exc) -> None:
        self.uninstall()

    def _wrap(self, allocator, device: str) -> None:
        allocate, deallocate = allocator.allocate, allocator.deallocate
        ledger = self

        def tracked_allocate(size_in_bytes):
            ptr = allocate(size_in_bytes)
            if ledger.active and ptr:
                ledger._seq += 1
                ledger.live[ptr] = Block(ptr, int(size_in_bytes), ledger._seq, device)
                ledger.freed.pop(ptr, None)
                ledger._sorted = None
            return ptr

        def tracked_deallocate(ptr, size_in_bytes):
            if ledger.active and ptr:
                block = ledger.live.pop(ptr, None)
                ledger.freed[ptr] = block or Block(ptr, int(size_in_bytes), 0, device)
                ledger._sorted = None
                if ledger.quarantine:
                    ledger._held.append((deallocate, ptr, size_in_bytes))
                    return None
            return deallocate(ptr, size_in_bytes)

        allocator.allocate = tracked_allocate
        allocator.deallocate = tracked_deallocate
        allocator._gradcheck_ledger = self

    # -- queries ------------------------------------------------------------------------------
    def block_at(self, ptr: int) -> Block | None:
        """The live block containing ``ptr`` (allocated while the ledger watched), or None."""
        if not ptr:
            return None
        block = self.live.get(ptr)
        if block is not None:
            return block
        if self._sorted is None:
            self._sorted = sorted(self.live)
        i = bisect.bisect_right(self._sorted, ptr) - 1
        if i >= 0:
            block = self.live[self._sorted[i]]
            if block.contains(ptr):
                return block
        return None

    def freed_at(self, ptr: int) -> Block | None:
        """A block freed while the ledger watched that contained ``ptr`` and is not live again."""
        if not ptr:
            return None
        block = self.freed.get(ptr)
        if block is not None:
            return block
        for block in self.freed.values():  # interior pointers are rare: a linear scan is fine
            if block.contains(ptr):
                return block
        return None


def _allocators(device) -> list:
    found = []
    for name in ("default_allocator", "pinned_allocator", "current_allocator", "_custom_allocator"):
        allocator = getattr(device, name, None)
        if allocator is not None and hasattr(allocator, "allocate") and hasattr(allocator, "deallocate"):
            found.append(allocator)
    return found
