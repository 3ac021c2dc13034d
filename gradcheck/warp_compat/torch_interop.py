"""Warp's side of the torch<->Warp bridge: ``wp.from_torch`` and ``wp.to_torch`` report each pair they make to the
torch side of the observer (gradcheck.pytorch.watch), which keys everything by the torch tensor. Installed
by gradcheck.pytorch.patches.observed (its ``patch`` undoes everything on exit). Also the Warp facts the torch side
asks for: Warp's streams waited on (``synchronize_warp``), whether Warp's code ran (``WarpActivity``), the torch
views of an array's memory (``torch_views``)."""

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
    from gradcheck.warp_compat.runtime import internal_module

    if getattr(internal_module("context"), "runtime", None) is not None:
        warp.synchronize()


class WarpActivity:
    """Whether Warp's own code ran in a thread between ``start()`` and ``stop()``: does a custom
    ``torch.autograd.Function``'s backward run Warp (a tape backward, adjoint launches, kernels of its own)?

    A profile function of that thread only (``sys.setprofile``), removed at the first call into Warp's package, so
    it costs one test per Python call for a backward that never reaches Warp. ``start``/``stop`` are called from the
    Function's node hooks: they run in the thread that runs its backward (CUDA backwards run on torch's device
    threads). A thread that already has a profile function (the program profiling itself) is left alone:
    ``unknown``."""

    def __init__(self) -> None:
        self.seen = False
        self.unknown = False
        self._profile = None

    def start(self) -> None:
        if "warp" not in sys.modules:
            return  # nothing of Warp's can run before the program imports it
        if sys.getprofile() is not None:
            self.unknown = True
            return
        from gradcheck.warp_compat.hooks import _is_warp_file

        def profile(frame, event, arg):
            if event == "call" and _is_warp_file(frame.f_code.co_filename):
                self.seen = True
                sys.setprofile(None)

        self._profile = profile
        sys.setprofile(profile)

    def stop(self) -> None:
        if self._profile is not None and sys.getprofile() is self._profile:
            sys.setprofile(None)
        self._profile = None


def torch_views(value) -> list[tuple[str, object]] | None:
    """``value`` is a Warp array: torch tensors sharing memory with it and with its gradient (``("", data)``,
    ``(".grad", gradient)``), those torch can view; None when it is no Warp array. What a custom Function reaches
    through Warp arrays it keeps (a class attribute, a module global) can then be copied and compared as tensors."""
    warp = sys.modules.get("warp")
    if warp is None or not isinstance(value, warp.array):
        return None
    views = []
    for suffix, array in (("", value), (".grad", getattr(value, "grad", None))):
        if array is None or not getattr(array, "ptr", None):
            continue
        try:
            views.append((suffix, warp.to_torch(array, requires_grad=False)))
        except Exception:  # noqa: BLE001 - a dtype or layout torch cannot view (structs): not compared
            continue
    return views
