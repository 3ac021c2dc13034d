"""Device allocators: wrapped so an allocation ledger sees every allocate and free."""

from __future__ import annotations


def allocator_methods(allocator) -> tuple[str, str] | tuple[()]:
    """Names of a device allocator's allocate and free methods: ``allocate``/``deallocate`` from 1.10,
    ``alloc``/``free`` before (arrays free through ``allocator.deleter``, which looks ``self.free`` up
    on every call, so wrapping the instance attribute sees every free)."""
    for names in (("allocate", "deallocate"), ("alloc", "free")):
        if all(callable(getattr(allocator, n, None)) for n in names):
            return names
    return ()


# -- device allocators ----------------------------------------------------------------------------------


def device_allocators(device) -> list:
    """The allocator objects of a Warp device (default, pinned, current, custom) that allocate and free."""
    found = []
    for name in ("default_allocator", "pinned_allocator", "current_allocator", "_custom_allocator"):
        allocator = getattr(device, name, None)
        if allocator is not None and allocator_methods(allocator) and all(a is not allocator for a in found):
            found.append(allocator)
    return found


def wrap_allocator(allocator, wrap, marker: object):
    """Replace an allocator's allocate/free methods on the instance with ``wrap(allocate, free)``'s pair.

    Returns a function that restores the originals, or None when a ledger has wrapped ``allocator`` already
    (``marker`` is kept on it while wrapped). Arrays allocated meanwhile free through ``allocator.deleter``, which looks
    the free method up on every call, so the wrapper sees every free."""
    if getattr(allocator, "_gradcheck_ledger", None) is not None:
        return None
    names = allocator_methods(allocator)
    saved = {k: allocator.__dict__[k] for k in names if k in allocator.__dict__}
    tracked = wrap(*(getattr(allocator, n) for n in names))
    for name, method in zip(names, tracked):
        setattr(allocator, name, method)
    allocator._gradcheck_ledger = marker

    def restore() -> None:
        for key in (*names, "_gradcheck_ledger"):
            allocator.__dict__.pop(key, None)
        allocator.__dict__.update(saved)

    return restore
