"""The torch<->Warp bridge: which tensor and which Warp array share memory, and what goes wrong between them.

Facts of warp-lang 1.19 + torch this rests on (measured): ``wp.from_torch(t)`` takes ``requires_grad`` from the
tensor and wraps ``t.grad`` as the array's gradient (allocating Warp zeros and assigning them to ``t.grad`` when it
is None); ``optimizer.zero_grad()`` (set_to_none) leaves a wrapper made earlier pointing at a buffer torch no longer
holds; when ``.grad`` is None torch adopts a returned tensor without copying; Warp's backward zeroes an output's
adjoint after reading it; and Warp's writes through these aliases do not bump torch's version counters, so
autograd's own in-place check never fires. Wrappers are made afresh every step: everything is keyed by the torch
tensor (its name, pytorch.names), never by the wrapper.

Found on an audited torch backward (``BridgeIssue``, judged by checks.torch_bridge):

- ``doubled-gradient``: a custom Function's backward returned, for a leaf, a tensor whose memory already is that
  leaf's ``.grad`` (``wp.to_torch(x_wp.grad)`` of a ``wp.from_torch(x)`` wrapper): torch adds it into itself;
- ``orphaned-alias``: Warp wrote a tensor's gradient during backward into the buffer a wrapper made earlier
  aliased, and that buffer is no longer the tensor's ``.grad`` (torch replaced it): the gradient is lost;
- ``tape-reused``: an adjoint Warp hands to torch (``wp.to_torch``) in a torch backward still held what it handed
  in an earlier one when Warp's backward began (a tape and arrays made once and reused, never zeroed);
- ``grad-output-written``: a custom Function's backward changed its ``grad_output`` in place (Warp zeroes
  ``y.grad = wp.from_torch(grad_output)`` after reading it); torch may have handed the same tensor to another node;
- a tensor that requires grad handed to Warp as an array without gradient (``wp.from_torch(x.detach())``): the
  missing gradient's cause (a ``ChainBreak``, said by missing-gradient).
"""

from __future__ import annotations

import itertools
import weakref
from dataclasses import dataclass

from gradcheck.model.sites import caller_site, short
from gradcheck.model.trace import BridgeIssue, ChainBreak

MAX_ALIASES = 4096  # live wrappers remembered (dead ones are dropped first)
MAX_ISSUES = 64
MAX_PAIRS = 32  # distinct (call site, with gradient) wrappers named in the report


@dataclass
class _Alias:
    array: object  # () -> the wrapper or None (an array descriptor, return_ctype=True, has no weak reference)
    tensor: weakref.ref
    data: int
    grad: int  # the wrapper's gradient memory (0: none)
    site: str
    made: int = 0  # torch backwards done when it was made


def _gone():
    return None


class Bridge:
    def __init__(self, watch) -> None:
        self._watch = watch
        self._aliases: dict[int, _Alias] = {}
        self._returned: dict[int, str] = {}  # data_ptr -> where wp.to_torch made a tensor of it
        self._issues: dict[tuple, BridgeIssue] = {}
        self._hooks: list = []
        self._seq = itertools.count()
        self._orphans: dict = {}
        self._index = 0  # the torch backward the issues of this pass belong to (the report's backward number)
        self._pass = 0  # audited passes so far: each torch backward, and each torch.autograd.grad call, is one
        self._label = "torch backward #0"  # what this pass is called in a message
        self._produced: dict = {}  # id(producer node) -> {"ptrs": the gradients it handed on, by edge}
        self._ran: dict = {}  # id(node) -> when it started (a sequence number), None before it ran
        self._incoming: dict = {}  # id(custom node) -> [(grad_output, its fingerprint)] as it started
        self.in_backward = False  # a torch backward runs (set by the watch)
        self._pairs: dict = {}  # (site, with .grad) -> (weakref to the tensor, "array" | "ctype"): what shares memory
        self._running: list = []  # the custom nodes running now (innermost last)
        # Warp arrays handed to torch (wp.to_torch) during the last audited torch backward: id -> (array, ptr,
        # backward); those of this one, kept for the next (a reused tape hands the same arrays every time)
        self._handed: dict[int, tuple] = {}
        self._handing: dict[int, tuple] = {}
        self._leftover: dict[int, tuple] = {}  # id -> (norm, backward that left it): nonzero as Warp's backward began

    # -- the pairs ----------------------------------------------------------------------------------------------
    def on_from_torch(self, tensor, array) -> None:
        from gradcheck.pytorch.patches import data_ptr

        grad = getattr(array, "grad", None)
        grad_ptr = grad if isinstance(grad, int) else int(getattr(grad, "ptr", 0) or 0)
        data = int(getattr(array, "ptr", 0) or getattr(array, "data", 0) or 0) or data_ptr(tensor)
        if len(self._aliases) >= MAX_ALIASES:
            self._aliases = {k: a for k, a in self._aliases.items() if a.array() is not None}
            while len(self._aliases) >= MAX_ALIASES:
                self._aliases.pop(next(iter(self._aliases)))
        try:
            ref = weakref.ref(array)
        except TypeError:  # an array descriptor (return_ctype=True): its pointers are known, not its lifetime
            ref = _gone
        try:
            alias = _Alias(ref, weakref.ref(tensor), data, grad_ptr, short(caller_site()), self._watch.backwards)
        except TypeError:
            return
        self._aliases[id(array) if ref is not _gone else id(alias)] = alias
        pair = (alias.site, bool(grad_ptr))
        if pair not in self._pairs and len(self._pairs) < MAX_PAIRS:
            self._pairs[pair] = (alias.tensor, "ctype" if ref is _gone else "array", tuple(tensor.shape))

    def on_to_torch(self, array, tensor) -> None:
        from gradcheck.pytorch.patches import data_ptr

        if len(self._returned) > MAX_ALIASES:
            self._returned.clear()
        site = short(caller_site())
        self._returned[data_ptr(tensor)] = site
        if not self.in_backward:
            return
        left = self._leftover.pop(id(array), None)
        if left is not None and left[2]() is array:  # not a new array at a freed one's id
            self.add(self._reused_issue(array, left[:2], site))
        if len(self._handing) < MAX_ALIASES:
            ptr = int(getattr(array, "ptr", 0) or 0)
            self._handing[id(array)] = (weakref.ref(array), ptr, self._pass, self._label)

    def before_warp_backward(self) -> None:
        """A Warp tape's backward is about to run inside a torch backward: an adjoint buffer handed to torch in an
        earlier torch backward that is still nonzero now is what this backward will add to (nothing zeroed it)."""
        if not self.in_backward or not self._handed:
            return
        from gradcheck.warp_compat.torch_interop import synchronize_warp

        synchronize_warp()
        for key, (ref, ptr, handed_in, label) in list(self._handed.items()):
            array = ref()
            if array is None or int(getattr(array, "ptr", 0) or 0) != ptr:
                del self._handed[key]
                continue
            if handed_in >= self._pass or key in self._leftover:
                continue
            nonzero, norm = self._nonzero_norm(array)
            if nonzero:
                self._leftover[key] = (norm, label, ref)

    def _nonzero_norm(self, array) -> tuple[int, float]:
        import warp as wp

        from gradcheck.pytorch.stats import nonzero_norm

        with self._watch.ignoring():
            return nonzero_norm(wp.to_torch(array, requires_grad=False))

    def _reused_issue(self, array, left: tuple, site: str) -> BridgeIssue:
        norm, label = left
        warp = self._watch.warp
        name = warp.names.known(array) if warp is not None else None
        name = name or f"a Warp array of shape {tuple(array.shape)}"
        function = _function(self._running[-1]) if self._running else "the Function"
        return BridgeIssue(
            kind="tape-reused", subject=name, site=site,
            detail=f"{function}.backward handed {name} to torch (wp.to_torch at {site}) as a gradient, but it still "
            f"held the adjoint of {label} (norm {norm:.4g}) when Warp's backward began: the tape and its arrays "
            "are reused and nothing zeroed them, so torch receives the sum of both backwards",
            fix="call tape.zero() before (or right after) tape.backward in the Function's backward, or make the "
            "tape and its arrays afresh in every forward",
            backward=self._index,
        )  # fmt: skip

    def shared(self) -> str | None:
        """One line for the report: which torch tensors Warp arrays share memory with, and where they were made."""
        if not self._pairs:
            return None
        shown = []
        for (site, with_grad), (ref, kind, shape) in list(self._pairs.items())[:8]:
            tensor = ref()
            name = (self._watch.name_of(tensor) if tensor is not None else None) or f"a tensor{shape}"
            what = "an array descriptor (return_ctype=True)" if kind == "ctype" else "a Warp array"
            shown.append(f"{name} with {what}{' and its .grad' if with_grad else ''} ({site})")
        more = f" and {len(self._pairs) - 8} more" if len(self._pairs) > 8 else ""
        return "torch<->Warp memory shared through wp.from_torch: " + "; ".join(shown) + more

    # -- one audited backward -----------------------------------------------------------------------------------
    def before(self, graph, index: int, label: str | None = None) -> None:
        """An audited pass begins over ``graph``: torch backward ``index``, or a ``torch.autograd.grad`` call in it
        (``label`` says which, for messages)."""
        self._index = index
        self._pass += 1
        self._label = label or f"torch backward #{index}"
        self._orphans = self._orphan_candidates()
        for node in graph.custom:
            self._hooks.append(node.register_prehook(self._pre(node)))
            self._hooks.append(node.register_hook(self._post(node, graph)))
            for producer, _edge in graph.producers.get(id(node), ()):
                self._watch_producer(producer)

    def _watch_producer(self, producer) -> None:
        if getattr(producer, "_gradcheck_seen", None) == self._pass:
            return
        try:
            producer._gradcheck_seen = self._pass
        except AttributeError:
            pass
        out: dict = {}
        self._produced[id(producer)] = out

        def post(grad_inputs, grad_outputs):
            out["ptrs"] = [_ptr(g) for g in grad_inputs]

        self._hooks.append(producer.register_hook(post))
        for child, _nr in producer.next_functions:
            if child is not None and id(child) not in self._ran:
                self._ran[id(child)] = None

                def pre(grad_outputs, key=id(child)):
                    self._ran[key] = next(self._seq)

                self._hooks.append(child.register_prehook(pre))

    def _pre(self, node):
        from gradcheck.pytorch.stats import fingerprint

        def pre(grad_outputs):
            self._running.append(node)
            with self._watch._guard("bridge: grad_output"):
                node_state = [(g, fingerprint(g)) for g in grad_outputs if g is not None]
                self._incoming[id(node)] = node_state

        return pre

    def _post(self, node, graph):
        def post(grad_inputs, grad_outputs):
            if self._running and self._running[-1] is node:
                self._running.pop()
            with self._watch._guard("bridge: returned gradients"):
                self._doubled(node, grad_inputs)
                self._written(node, graph)

        return post

    def _doubled(self, node, grad_inputs) -> None:
        from gradcheck.pytorch.patches import data_ptr

        for edge, returned in enumerate(grad_inputs):
            if returned is None or not returned.numel() or edge >= len(node.next_functions):
                continue
            variable = getattr(node.next_functions[edge][0], "variable", None)
            grad = getattr(variable, "grad", None)
            if grad is None or data_ptr(grad) != data_ptr(returned):
                continue
            name = self._watch.name_of(variable) or f"tensor{tuple(variable.shape)}"
            made = self._returned.get(data_ptr(returned))
            where = f"the tensor made by wp.to_torch at {made}" if made else "a tensor sharing its memory"
            self.add(BridgeIssue(
                kind="doubled-gradient", subject=f"{name}.grad", site=made or _function_site(node),
                detail=f"{_function(node)}.backward returned, as the gradient of {name}, {where}, which already is "
                f"{name}.grad (wp.from_torch({name}) wrapped it as the Warp array's gradient): torch adds the "
                "returned tensor into that same memory, so the gradient doubles",
                fix=f"return a gradient of Warp's own: wp.from_torch({name}, requires_grad=False) and then "
                "requires_grad=True on the array (a fresh adjoint), or return None for it and let Warp write "
                f"{name}.grad through the alias, not both",
                backward=self._index,
            ))  # fmt: skip

    def _written(self, node, graph) -> None:
        from gradcheck.pytorch.stats import fingerprint

        for g, before in self._incoming.pop(id(node), ()):
            if fingerprint(g) == before:
                continue
            written_at = next(self._seq)
            others = []
            for producer, edge in graph.producers.get(id(node), ()):
                ptrs = self._produced.get(id(producer), {}).get("ptrs") or []
                for j, ptr in enumerate(ptrs):
                    if j != edge and ptr and ptr == _ptr(g) and producer.next_functions[j][0] is not None:
                        others.append(producer.next_functions[j][0])
            after = [o for o in others if (self._ran.get(id(o)) or -1) < 0 or self._ran[id(o)] > written_at]
            self.add(_written_issue(node, g, others, after, self._watch, self._index))

    # -- after it -----------------------------------------------------------------------------------------------
    def release(self) -> None:
        """The backward was not audited after all (its setup failed): no hook of ours stays on its graph."""
        for handle in self._hooks:
            handle.remove()
        self._hooks, self._incoming, self._produced, self._ran = [], {}, {}, {}
        self._running, self._leftover, self._orphans = [], {}, {}

    def after(self, index: int) -> None:
        from gradcheck.warp_compat.torch_interop import synchronize_warp

        for handle in self._hooks:
            handle.remove()
        if self._aliases or self._orphans:
            synchronize_warp()
        self._hooks, self._incoming, self._produced, self._ran = [], {}, {}, {}
        self._returned, self._running, self._leftover = {}, [], {}
        self._handed, self._handing = self._handing, {}
        for alias, before in self._orphans.values():
            with self._watch._guard("bridge: orphaned alias"):
                self._orphaned(alias, before)
        self._orphans = {}

    def _orphan_candidates(self) -> dict:
        """Live wrappers whose gradient memory is no longer their tensor's ``.grad``: fingerprinted now, to see
        whether this backward writes there."""
        from gradcheck.pytorch.patches import data_ptr
        from gradcheck.warp_compat.torch_interop import synchronize_warp

        if self._aliases:
            synchronize_warp()

        found = {}
        for key, alias in list(self._aliases.items()):
            array, tensor = alias.array(), alias.tensor()
            if array is None or tensor is None or not alias.grad or getattr(array, "grad", None) is None:
                continue
            if tensor.grad is not None and data_ptr(tensor.grad) == alias.grad:
                continue
            found[key] = (alias, self._grad_print(array))
        return found

    def _grad_print(self, array) -> int:
        import warp as wp

        from gradcheck.pytorch.stats import fingerprint

        with self._watch.ignoring():
            return fingerprint(wp.to_torch(array.grad, requires_grad=False))

    def _orphaned(self, alias: _Alias, before: int) -> None:
        from gradcheck.pytorch.patches import data_ptr

        array, tensor = alias.array(), alias.tensor()
        if array is None or tensor is None or array.grad is None or self._grad_print(array) == before:
            return
        if tensor.grad is not None and data_ptr(tensor.grad) == alias.grad:
            return  # torch adopted that memory again as the tensor's gradient
        name = self._watch.name_of(tensor) or f"tensor{tuple(tensor.shape)}"
        now = "None" if tensor.grad is None else "another buffer"
        self.add(BridgeIssue(
            kind="orphaned-alias", subject=f"{name}.grad", site=alias.site,
            detail=f"Warp wrote {name}'s gradient during this backward into the buffer that wp.from_torch({name}) "
            f"at {alias.site} wrapped as {name}.grad, but {name}.grad is {now} now (zero_grad() with "
            "set_to_none=True, or an assignment, replaced it after the wrapper was made): torch never sees that "
            "gradient",
            fix=f"make the Warp array from {name} inside forward (wp.from_torch every step), or zero with "
            "optimizer.zero_grad(set_to_none=False), so the wrapper and torch hold the same .grad",
            backward=self._index,
        ))  # fmt: skip

    def detached(self, tensor, key: str) -> ChainBreak | None:
        """The param went to Warp as an array without gradient (a detached copy, or requires_grad=False)."""
        from gradcheck.pytorch.patches import data_ptr

        ptr = data_ptr(tensor)
        for alias in reversed(list(self._aliases.values())):
            array = alias.array()
            if not ptr or alias.data != ptr or alias.grad:
                continue
            if array is None and alias.array is not _gone or getattr(array, "grad", None) is not None:
                continue
            return ChainBreak(
                param=key, cause="detached", array=key, launch=f"wp.from_torch ({alias.site})", index=None,
                detail=f"{key} went to Warp at {alias.site} as an array without gradient (a .detach()ed copy, or "
                "requires_grad=False): Warp computes no adjoint for it, so no gradient reaches it through the "
                "Warp kernels",
                fix=f"wrap {key} itself with a gradient: wp.from_torch({key}, requires_grad=False) then "
                "requires_grad=True on the array, and return that array's adjoint (wp.to_torch(a.grad)) from the "
                "Function's backward",
            )  # fmt: skip
        return None

    def orphaned(self, key: str) -> ChainBreak | None:
        """The param's gradient went to an orphaned alias in this backward (an orphaned-alias issue)."""
        issue = self._issues.get(("orphaned-alias", f"{key}.grad"))
        if issue is None:
            return None
        return ChainBreak(
            param=key, cause="orphaned", array=key, launch=f"wp.from_torch ({issue.site})", index=None,
            detail=f"Warp wrote its gradient into the buffer wp.from_torch({key}) at {issue.site} wrapped, which "
            f"torch no longer holds as {key}.grad (see torch-bridge)",
            fix=issue.fix,
        )  # fmt: skip

    def grad_owner(self, ptr: int) -> str | None:
        """The tensor whose gradient a wrapper's gradient memory at ``ptr`` aliases (or aliased)."""
        for alias in self._aliases.values():
            if alias.grad == ptr and alias.array() is not None:
                tensor = alias.tensor()
                name = self._watch.name_of(tensor) if tensor is not None else None
                return f"{name}.grad" if name else None
        return None

    def write_sites(self) -> dict:
        """Where wp.from_torch made each live wrapper, by what it lets Warp write: ``("param", id)`` for a tensor
        wrapped with its gradient (Warp's backward writes its ``.grad``), ``("tensor", id)`` and ``("memory", ptr)``
        for the memory itself, ``("gone", ptr)`` for the memory of a tensor no longer alive (``("recent", ptr)``: made
        since the last backward) (pytorch.ranks names the writes that bypass DDP's all-reduce with them)."""
        found: dict = {}
        for alias in self._aliases.values():
            tensor = alias.tensor()
            if tensor is None:  # a view gone since (w.data.view(-1)): its memory, for a parameter's, which stays put
                found.setdefault(("gone", alias.data), alias.site)
                if alias.made == self._watch.backwards:  # since the last backward: memory not freed and reused since
                    found.setdefault(("recent", alias.data), alias.site)
                continue
            if alias.grad:
                found.setdefault(("param", id(tensor)), alias.site)
                found.setdefault(("memory", alias.grad), alias.site)
            found.setdefault(("tensor", id(tensor)), alias.site)
            found.setdefault(("memory", alias.data), alias.site)
        return found

    def returned_ptrs(self) -> dict:
        """Addresses ``wp.to_torch`` made tensors of on this forward (the Warp memory torch was handed) -> where."""
        return self._returned

    def add(self, issue: BridgeIssue) -> None:
        """An issue, the bridge's own or another part's of the watch (pytorch.grad_calls, pytorch.saved_overwrites)."""
        key = (issue.kind, issue.subject)
        if key not in self._issues and len(self._issues) < MAX_ISSUES:
            self._issues[key] = issue

    def issues(self) -> tuple[BridgeIssue, ...]:
        return tuple(self._issues.values())


def _ptr(tensor) -> int:
    from gradcheck.pytorch.patches import data_ptr

    return data_ptr(tensor) if tensor is not None else 0


def _function(node) -> str:
    return type(node).__name__.removesuffix("Backward") or type(node).__name__


def _function_site(node) -> str | None:
    import inspect

    cls = getattr(node, "_forward_cls", None)
    try:
        lines = inspect.getsourcelines(cls.backward)
        return short(f"{inspect.getsourcefile(cls.backward)}:{lines[1]}")
    except (TypeError, OSError, AttributeError):
        return None


def _consumer(node, watch) -> str:
    variable = getattr(node, "variable", None)
    if variable is not None:
        return f"the gradient of {watch.name_of(variable) or 'a leaf'}"
    return type(node).__name__


def _written_issue(node, g, others: list, after: list, watch, index: int) -> BridgeIssue:
    from gradcheck.pytorch.stats import nonzero_norm

    nonzero, _norm = nonzero_norm(g)
    how = "zeroed" if nonzero == 0 else "changed"
    name = _function(node)
    if after:
        lost = ", ".join(_consumer(o, watch) for o in after[:3])
        consequence = (
            f"torch handed the same tensor to {lost}, which read it after the write: that branch's gradient is "
            "lost or corrupted"
        )
    elif others:
        consequence = "torch handed the same tensor to another node, which happened to read it first"
    else:
        consequence = "torch may hand the same tensor to other nodes (a sum passes its gradient to both terms)"
    return BridgeIssue(
        kind="grad-output-written", subject=f"{name}.backward grad_output", site=_function_site(node),
        detail=f"{name}.backward {how} its grad_output in place (Warp's backward zeroes an output's adjoint after "
        f"reading it: y.grad = wp.from_torch(grad_output)); {consequence}",
        fix="give Warp a copy to consume: y.grad = wp.from_torch(grad_output.clone())",
        backward=index, shared=bool(after),
    )  # fmt: skip
