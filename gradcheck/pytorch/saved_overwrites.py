"""Tensors torch keeps for a backward whose memory Warp wrote behind torch's back (a part of pytorch.watch).

A custom Function that returns ``wp.to_torch(out)`` of an output array it allocates once hands torch a tensor that
*is* that Warp memory. Called twice in one forward, its second call writes the memory the first call returned; an
op that saved the first output for its backward (``h1 * w1`` saves ``h1``: the gradient of ``w1``) then computes
that gradient from the second call's values. torch's version counter cannot see Warp's writes (nor can its own
in-place check): the gradient is silently wrong. The same for a tensor a Function saved itself
(``ctx.save_for_backward(wp.to_torch(buffer))``) that a later call overwrites.

Evidence, on the forwards of audited backwards only: each tensor a custom Function returns or saves that is Warp
memory (its address is one ``wp.to_torch`` gave, pytorch.bridge) is fingerprinted as the Function returns. Before
the backward runs, a tensor whose bytes changed while its version did not was written behind torch's back; it is
an error when a node of this backward saved it (only bytes the backward reads count: an output used and
overwritten in the forward alone is not this backward's business), naming the node that saved it, the Function
that returned it and the later call that wrote the same memory. A tensor a Function saved itself is judged after
that Function's backward ran: one that recomputes its buffer before reading it (on purpose) leaves the same bytes
and is silent. An overwrite with identical values is never one.

The other way round: a Function that writes its *argument* in place through a ``wp.from_torch`` alias (torch's own
memory) after another op saved that tensor. Its tensor arguments are fingerprinted before and after it runs; one
whose bytes changed while its version did not (``ctx.mark_dirty`` would move it) is an error for each node of the
backward that saved it *before* the write (a lower sequence number than the Function's node: it saved the old
values); a node that saved it afterwards saved what was written. Writes through ``.data``, ``.numpy()`` or a
``wp.from_torch`` alias outside a Function: pytorch.unversioned.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from gradcheck.model.sites import caller_site, short
from gradcheck.model.trace import BridgeIssue

MAX_RECORDS = 256  # tensors kept, and Function calls whose arguments are fingerprinted, per forward
MAX_INPUT_ELEMENTS = 1 << 22  # a Function's argument fingerprinted before and after it runs, up to this size


@dataclass
class _Kept:
    tensor: weakref.ref
    ptr: int
    bytes_print: int  # its fingerprint as the Function returned
    version: int
    function: str  # the Function's name
    site: str  # the line that called it
    own: bool  # saved by the Function's own node (judged after its backward), else returned by it
    node: object  # the Function's node (weakly: its grad_fn)
    order: int


class SavedOverwrites:
    def __init__(self, watch) -> None:
        self._watch = watch
        self._kept: list[_Kept] = []
        self._written: list[tuple] = []  # (weakref, address, Function node's sequence number, name, site, position)
        self._hooks: list = []
        # Function calls whose arguments were fingerprinted since the last audited backward: bounded, as a program
        # that never calls backward (inference) keeps the cadence's first window open for good
        self._calls = 0

    def inputs(self, args: tuple) -> list:
        """A Function is about to run: its tensor arguments' fingerprints and versions (what Warp may write in place
        through ``wp.from_torch`` aliases while torch's version counter sees nothing)."""
        if self._calls >= MAX_RECORDS:
            return []
        self._calls += 1
        import torch

        from gradcheck.pytorch.stats import fingerprint

        found = []
        for position, arg in enumerate(args):
            if isinstance(arg, torch.Tensor) and 0 < arg.numel() <= MAX_INPUT_ELEMENTS and not arg.is_sparse:
                found.append((position, arg, fingerprint(arg), arg._version))
        return found

    def returned(self, cls, result, inputs: list | None = None) -> None:
        """``cls.apply`` returned ``result``: its outputs and what its node saved, where they are Warp memory; and
        its arguments it wrote in place behind torch's back (``inputs``: as they were before it ran)."""
        from gradcheck.pytorch.graph import tensors_in

        outputs = tensors_in(result)
        node = next((o.grad_fn for o in outputs if o.grad_fn is not None), None)
        if inputs:
            self._written_inputs(cls, node, inputs)
        warp_memory = self._watch.bridge.returned_ptrs()
        if not warp_memory or len(self._kept) >= MAX_RECORDS:
            return  # no wp.to_torch on this forward (most Functions copy): nothing can alias Warp memory

        from gradcheck.pytorch.patches import data_ptr
        from gradcheck.pytorch.stats import fingerprint

        saved = []
        if node is not None:
            try:
                saved = list(getattr(node, "saved_tensors", ()) or ())
            except RuntimeError:  # already freed or modified: torch will say so itself
                saved = []
        site = None
        for own, tensor in [*((False, t) for t in outputs), *((True, t) for t in saved)]:
            ptr = data_ptr(tensor)
            if ptr not in warp_memory or len(self._kept) >= MAX_RECORDS:
                continue
            site = site or short(caller_site())
            node_ref = weakref.ref(node) if node is not None else None
            self._kept.append(_Kept(weakref.ref(tensor), ptr, fingerprint(tensor), tensor._version, cls.__name__,
                                    site, own, node_ref, len(self._kept)))  # fmt: skip

    def _written_inputs(self, cls, node, inputs: list) -> None:
        """Arguments whose bytes the Function changed while their version did not (Warp wrote them through an
        alias; ``ctx.mark_dirty`` would have moved the version): kept with the Function's node, whose sequence
        number says which nodes had saved them before the write."""
        from gradcheck.pytorch.patches import data_ptr
        from gradcheck.pytorch.stats import fingerprint

        order = node._sequence_nr() if node is not None and hasattr(node, "_sequence_nr") else None
        if order is None:
            return  # no node of its own (no output needs a gradient): no saver can be ordered against the write
        for position, tensor, before, version in inputs:
            if tensor._version != version or fingerprint(tensor) == before or len(self._written) >= MAX_RECORDS:
                continue
            self._written.append((weakref.ref(tensor), data_ptr(tensor), order, cls.__name__, short(caller_site()),
                                  position))  # fmt: skip

    def before(self, graph, index: int) -> set:
        """An audited backward is about to run over ``graph``: the kept tensors Warp wrote since. Returns the
        addresses of the arguments it named (written in place by a Function)."""
        from gradcheck.pytorch.stats import fingerprint

        kept, self._kept = self._kept, []
        written, self._written = self._written, []
        self._calls = 0
        reported = self._judge_written(graph, written, index) if written else set()
        changed = []
        for entry in kept:
            tensor = entry.tensor()
            if tensor is not None and tensor._version == entry.version and fingerprint(tensor) != entry.bytes_print:
                changed.append((entry, tensor))
        if not changed:
            return reported
        savers = _savers(graph.nodes_seen, {entry.ptr for entry, _t in changed})
        for entry, tensor in changed:
            writer = _writer(entry, kept)
            if entry.own:
                self._judge_after(entry, tensor, writer, index)
                continue
            for node in savers.get(entry.ptr, ()):
                if entry.node is not None and node is entry.node():
                    continue  # the Function's own node: judged after it ran, as a tensor it saved
                self._watch.bridge.add(_issue(entry, writer, type(node).__name__, index, own=False))
                break
        return reported

    def _judge_written(self, graph, written: list, index: int) -> set:
        """An argument a Function wrote in place is an error for each node of this backward that had saved it
        before the write (a lower sequence number: saved the old values); a node that saved it afterwards saved
        what was written and reads what it saved."""
        savers = _savers(graph.nodes_seen, {ptr for _ref, ptr, *_rest in written})
        reported = set()
        for ref, ptr, order, function, site, position in written:
            if ref() is None:
                continue
            earlier = [n for n in savers.get(ptr, ()) if hasattr(n, "_sequence_nr") and n._sequence_nr() < order]
            if earlier:
                reported.add(ptr)
                self._watch.bridge.add(_input_issue(function, site, position, type(earlier[0]).__name__, index))
        return reported

    def _judge_after(self, entry: _Kept, tensor, writer: str, index: int) -> None:
        node = entry.node() if entry.node is not None else None
        if node is None:
            return

        def post(grad_inputs, grad_outputs):
            from gradcheck.pytorch.stats import fingerprint

            with self._watch._guard("saved tensors: after the Function's backward"):
                if fingerprint(tensor) != entry.bytes_print:
                    self._watch.bridge.add(_issue(entry, writer, f"{entry.function}Backward", index, own=True))

        self._hooks.append(node.register_hook(post))

    def after(self) -> None:
        for handle in self._hooks:
            handle.remove()
        self._hooks = []


def _savers(nodes, ptrs: set) -> dict:
    """address -> the nodes whose saved tensors start there."""
    found: dict = {}
    for node, _item, ptr in saved_items(nodes, ptrs):
        if node not in found.get(ptr, ()):
            found.setdefault(ptr, []).append(node)
    return found


def saved_items(nodes, ptrs: set):
    """(node, saved tensor, its address) for each tensor a node saved (``_saved_*``) that starts at one of ``ptrs``.
    torch unpacks a saved tensor only when its version check passes: one modified in place is left to torch's own
    error when backward reads it."""
    from gradcheck.pytorch.patches import data_ptr

    for node in nodes:
        for name in dir(node):
            if not name.startswith("_saved_"):
                continue
            try:
                value = getattr(node, name)
            except RuntimeError:  # modified in place: torch's own check will say so when backward reads it
                continue
            for item in value if isinstance(value, (tuple, list)) else (value,):
                ptr = data_ptr(item) if hasattr(item, "data_ptr") else 0
                if ptr in ptrs:
                    yield node, item, ptr


def _writer(entry: _Kept, kept: list) -> str:
    later = next((k for k in kept if k.order > entry.order and k.ptr == entry.ptr), None)
    if later is not None:
        return f"the next call of {later.function} ({later.site})"
    return "a write torch cannot see (a Warp launch through an alias of that memory)"


def _issue(entry: _Kept, writer: str, saver: str, index: int, own: bool) -> BridgeIssue:
    what = "a tensor it saved for its backward" if own else "its output"
    return BridgeIssue(
        kind="saved-overwritten", subject=f"{entry.function} {'saved tensor' if own else 'output'} ({entry.site})",
        site=entry.site,
        detail=f"{entry.function} (called at {entry.site}) gave torch {what}, a tensor that is Warp memory (wp.to_torch "
        f"without a copy); {writer} wrote that memory again before backward ran, and {saver} had saved it for this "
        "backward: torch's version counter cannot see Warp's writes, so the gradient is computed from other values",
        fix="return (and save) wp.to_torch(out).clone(), or allocate the Function's output array afresh in every "
        "forward",
        backward=index, shared=True,
    )  # fmt: skip


def _input_issue(function: str, site: str, position: int, saver: str, index: int) -> BridgeIssue:
    return BridgeIssue(
        kind="saved-overwritten", subject=f"{function} argument {position} ({site})", site=site,
        detail=f"{function} (called at {site}) changed its argument {position} in place (Warp wrote it through a "
        f"wp.from_torch alias), after {saver} had saved that tensor for this backward: torch's version counter "
        "cannot see Warp's writes, so that gradient is computed from the written values",
        fix="give Warp a copy to write (wp.from_torch(x.clone())) or a fresh output array, or declare the in-place "
        "write with ctx.mark_dirty(x) so that torch can check it",
        backward=index, shared=True,
    )  # fmt: skip
