"""Warp's side of the torch<->Warp bridge: ``wp.from_torch`` and ``wp.to_torch`` report each pair they make to the
torch side of the observer (gradcheck.observe.torch_watch), which keys everything by the torch tensor. Installed
by gradcheck.probes.torch_compat.observed (its ``patch`` undoes everything on exit)."""

from __future__ import annotations

import functools
import sys

_BRIDGED: set = set()


def bridge(watch, patch) -> None:
    """``wp.from_torch`` / ``wp.to_torch`` (and ``warp.torch``'s, where a Warp release has that module) report the
    pairs they make; Warp's own recursive calls (the gradient of a tensor) go through untouched."""
    warp = sys.modules.get("warp")
    if warp is None or id(watch) in _BRIDGED or not hasattr(warp, "from_torch"):
        return
    _BRIDGED.add(id(watch))
    owners = [warp] + [m for m in (sys.modules.get("warp.torch"),) if m is not None and hasattr(m, "from_torch")]
    for owner in owners:
        patch(owner, "from_torch", lambda original: _from_torch(watch, original))
        patch(owner, "to_torch", lambda original: _to_torch(watch, original))
    watch.on_exit.append(lambda: _BRIDGED.discard(id(watch)))


def _from_torch(watch, original):
    @functools.wraps(original)
    def from_torch(t, *args, **kwargs):
        result = original(t, *args, **kwargs)
        if not watch.busy:
            watch.on_from_torch(t, result)
        return result

    return from_torch


def _to_torch(watch, original):
    @functools.wraps(original)
    def to_torch(a, *args, **kwargs):
        result = original(a, *args, **kwargs)
        if not watch.busy:
            watch.on_to_torch(a, result)
        return result

    return to_torch


def synchronize_warp() -> None:
    """Wait for Warp's streams before torch reads memory Warp wrote (on CUDA, Warp's backward runs on Warp's stream,
    torch reads on its own); nothing when the program has not started Warp (that would print Warp's banner)."""
    warp = sys.modules.get("warp")
    if warp is None:
        return
    from gradcheck.probes.warp_compat.runtime import internal_module

    if getattr(internal_module("context"), "runtime", None) is not None:
        warp.synchronize()
