"""Writes torch does not version, under a tensor it saved for a backward (a part of pytorch.watch).

torch's in-place check covers every write it records: ``w.mul_(2)`` under ``torch.no_grad()`` after ``x * w``
saved ``w`` makes the backward raise. A write through an alias torch does not version is invisible to it, and the
backward then computes the gradient from the written values, silently: an in-place op on ``w.data``
(``p.data.clamp_(-c, c)``, a target network's ``.data.copy_``), a write through ``w.detach().numpy()``, a new
value assigned with ``w.data = ...``, and a Warp launch writing ``wp.from_torch(w)``. Measured on torch 2.13:
each leaves ``w._version`` unchanged and changes ``x.grad``; ``w.data.set_(...)`` rebinds only the alias.

Evidence, on the forwards of audited backwards only: each such alias taken after the forward began (autograd's
sequence number moved since the last backward: before that no node can have saved anything) records the
tensor's storage and the elements it covers, their bit-exact fingerprint in memory order as the alias is taken
(``w`` and the ``w.t()`` a Linear saves are the same elements), autograd's next sequence number and the line.
Before the backward runs, each tensor a node of it saved (its ``_saved_*``, which torch unpacks only when its own
version check passes: any change since is one torch did not see) is compared with the first alias taken after
that node saved it: different bytes are an error naming the tensor, the node and the alias whose write changed
them. An alias taken only to read (``w.data.norm()``), and a write that restores the same values, leave the bytes
as they were: silent. A write made before the op saved the tensor is what torch differentiates: silent.

Cost: outside an audited forward, a ``.data`` or ``.numpy()`` access pays one attribute test; inside one, an
alias taken before any node was made (an optimizer's ``p.data.add_`` loop after backward) pays a counter read,
and at most ``MAX_ACCESSES`` others a fingerprint each.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from gradcheck.model.sites import caller_site, short
from gradcheck.model.trace import BridgeIssue

MAX_ACCESSES = 256  # aliases fingerprinted per forward
MAX_ELEMENTS = 1 << 22  # a tensor fingerprinted when an alias of it is taken, up to this size
MAX_ALIASED = 4096  # tensors remembered as read through an alias, per forward

# how the alias was taken -> what it is, in a sentence
_ALIASES = {
    ".data": "its .data",
    ".numpy()": "a NumPy array sharing its memory (.numpy())",
    ".data = ...": "an assignment to its .data",
    "wp.from_torch": "a Warp array sharing its memory (wp.from_torch)",
}
# how the alias was taken -> what to do instead
_FIXES = {
    ".data": "write the tensor itself under torch.no_grad() (torch versions that write, and its backward says so "
    "if a saved tensor changed), or make the write after backward",
    ".numpy()": "write a copy (t.detach().numpy().copy()), or make the write after backward",
    ".data = ...": "assign the new value after backward (or compute it with an op torch records)",
    "wp.from_torch": "give Warp a copy to write (wp.from_torch(x.clone())) or a fresh array, or launch the kernel "
    "after backward",
}


@dataclass(frozen=True)
class _Access:
    storage: object  # a StorageWeakRef of the memory the alias writes (after an assignment: the new memory, which
    # the saved tensor now reads): a freed storage whose address is used again is not it
    ptr: int  # where the tensor starts in it (what a saved tensor is first matched on)
    footprint: tuple  # the elements it covers, in memory order (_footprint): a transpose covers the same ones
    order: int  # autograd's next sequence number as it was taken: nodes below it had saved the tensor already
    bytes_print: int  # the fingerprint of those elements as it was taken (for an assignment: the replaced values')
    how: str  # a key of _FIXES
    site: str
    name: str | None  # the tensor's name in the program, where the watch knew it as the alias was taken


def _sequence(torch) -> int:
    return int(torch._C._autograd._get_sequence_nr())


class UnversionedWrites:
    def __init__(self, watch) -> None:
        self._watch = watch
        self._accesses: list[_Access] = []
        self._quiet = -1  # autograd's next sequence number when the last backward ended (nothing made since)
        self.armed = False  # the next backward is audited: aliases taken now are recorded
        # id(tensor) -> how: tensors the forward read through an alias (missing-gradient: a Parameter read only
        # through .data is kept on purpose or lost, never an error)
        self.aliased: dict[int, str] = {}

    def rearm(self) -> None:
        """A backward ended (or the watch began): record aliases for the next one if it is audited."""
        import torch

        watch = self._watch
        self._accesses = []
        self.aliased = {}
        self._quiet = _sequence(torch)
        self.armed = watch.cadence.full(watch.backwards + 1) and hasattr(torch._C._autograd, "_get_sequence_nr")

    def _recording(self, torch) -> int | None:
        """autograd's next sequence number when an alias taken now must be recorded, else None."""
        watch = self._watch
        if watch.busy or watch.bridge.in_backward or len(self._accesses) >= MAX_ACCESSES:
            return None
        if watch._thread is not None and threading.get_ident() != watch._thread:
            return None  # sequence numbers are per thread: another thread's cannot be ordered against the graph
        order = _sequence(torch)
        return None if order == self._quiet else order

    def taken(self, tensor, how: str) -> None:
        """An alias torch does not version was taken of ``tensor`` (``how``: a key of _FIXES)."""
        import torch

        order = self._recording(torch)
        if order is None:
            return
        if len(self.aliased) < MAX_ALIASED:
            self.aliased.setdefault(id(tensor), how)
        if not _measurable(torch, tensor):
            return
        with self._watch._guard("unversioned alias"):
            self._accesses.append(_access(tensor, order, _print(tensor), how, short(caller_site()),
                                          self._watch.name_of(tensor)))  # fmt: skip

    def assigning(self, tensor):
        """``tensor.data = ...`` is about to run: what to record once it has (call the result with the tensor), or
        None."""
        import torch

        order = self._recording(torch)
        if order is None or not _measurable(torch, tensor):
            return None
        with self._watch._guard("unversioned alias"):
            before, site, name = _print(tensor), short(caller_site()), self._watch.name_of(tensor)

        def assigned(after) -> None:
            with self._watch._guard("unversioned alias"):
                self._accesses.append(_access(after, order, before, ".data = ...", site, name))

        return assigned

    def before(self, graph, index: int, reported: set) -> None:
        """An audited backward is about to run over ``graph``: each saved tensor an alias wrote since it was saved
        (addresses in ``reported`` were named by pytorch.saved_overwrites already)."""
        accesses, self._accesses = self._accesses, []
        self.armed = False
        if not accesses:
            return
        from gradcheck.pytorch.saved_overwrites import saved_items

        by_start: dict = {}
        for access in accesses:
            if access.ptr not in reported and not access.storage.expired():
                by_start.setdefault(access.ptr, []).append(access)
        judged: set = set()
        for node, item, ptr in saved_items(graph.nodes_seen, set(by_start)):
            order = node._sequence_nr() if hasattr(node, "_sequence_nr") else None
            key = _key(item)
            if order is None or key in judged:
                continue
            later = sorted((a for a in by_start[ptr] if a.order > order and _key_of(a) == key), key=lambda a: a.order)
            if not later:
                continue  # no alias of those elements taken since this node saved them
            now = _print(item)
            if later[0].bytes_print == now:
                continue  # read only, or restored: the backward reads what was saved
            judged.add(key)
            prints = [*(a.bytes_print for a in later[1:]), now]
            writer = next(a for a, after in zip(later, prints) if a.bytes_print != after)
            self._watch.bridge.add(_issue(self._name(item, ptr, later), type(node).__name__, writer, index))

    def _name(self, item, ptr: int, accesses: list) -> str:
        """The written tensor's name: as the watch knew it when an alias was taken, or a parameter or leaf it
        knows at that address (what a node saved is often a view: ``weight.t()``), or its shape."""
        from gradcheck.pytorch.patches import data_ptr

        known = next((a.name for a in accesses if a.name), None) or self._watch.name_of(item)
        if known is None:
            known = next((k for k, t in self._watch.tensors().items() if data_ptr(t) == ptr), None)
        return known or f"a tensor of shape {tuple(item.shape)}"


def _footprint(tensor) -> tuple:
    """The elements a tensor covers in its storage, in memory order: (offset, ((size, stride), ...) by decreasing
    stride, without dimensions of size 1, dtype). ``w`` and ``w.t()`` have the same one."""
    dims = sorted(((n, d) for n, d in zip(tensor.shape, tensor.stride()) if n != 1), key=lambda p: -p[1])
    return tensor.storage_offset(), tuple(dims), tensor.dtype


def _print(tensor) -> int:
    """The fingerprint of a tensor's elements in memory order (pytorch.stats.fingerprint weighs values by position:
    a transpose read in its own order would differ from the same bytes)."""
    from gradcheck.pytorch.stats import fingerprint

    offset, dims, _dtype = _footprint(tensor)
    return fingerprint(tensor.detach().as_strided([n for n, _d in dims], [d for _n, d in dims], offset))


def _access(tensor, order: int, bytes_print: int, how: str, site: str, name: str | None) -> _Access:
    from torch.multiprocessing.reductions import StorageWeakRef

    from gradcheck.pytorch.patches import data_ptr

    storage = StorageWeakRef(tensor.untyped_storage())
    return _Access(storage, data_ptr(tensor), _footprint(tensor), order, bytes_print, how, site, name)


def _key(tensor) -> tuple:
    from torch.multiprocessing.reductions import StorageWeakRef

    return StorageWeakRef(tensor.untyped_storage()), _footprint(tensor)


def _key_of(access: _Access) -> tuple:
    return access.storage, access.footprint


def _measurable(torch, tensor) -> bool:
    """A plain tensor of a size worth a fingerprint (not a torch.func transform's wrapper: no autograd graph of the
    program's saves it, and its values are the transform's)."""
    if not (isinstance(tensor, torch.Tensor) and 0 < tensor.numel() <= MAX_ELEMENTS):
        return False
    if tensor.layout != torch.strided or tensor.device.type == "meta":
        return False
    wrapped = getattr(getattr(torch._C, "_functorch", None), "is_functorch_wrapped_tensor", None)
    return not (wrapped is not None and wrapped(tensor))


def _issue(name: str, saver: str, writer: _Access, index: int) -> BridgeIssue:
    return BridgeIssue(
        kind="saved-overwritten", subject=f"{name} ({writer.site})", site=writer.site,
        detail=f"{name} was written through {_ALIASES[writer.how]}, taken at {writer.site}, after {saver} had saved "
        f"it for this backward: torch does not version writes through {writer.how}, so its in-place check cannot see this "
        "one, and the gradient is computed from the written values, not the ones the forward used",
        fix=_FIXES[writer.how], backward=index,
    )  # fmt: skip
