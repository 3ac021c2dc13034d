"""The torch side of the observer: each ``loss.backward()`` of a PyTorch program audited as a ``tape.backward`` is.

``gradcheck exec`` on a training loop that runs PyTorch's autograd (with Warp kernels inside a
``torch.autograd.Function``, or none at all) records, per backward, the same evidence the Warp side records and
hands it to the same checks in the same records (gradcheck.model.trace): an iteration is one torch backward; a
parameter is a tensor an optimizer holds (role ``updated``) or a leaf the loss reaches / a module parameter that
requires grad (role ``leaf``); its gradient's statistics after backward (pytorch.stats); leftovers across an
optimizer step (``Residue``: the step moved the params and nothing cleared ``.grad`` before the next backward, so
this backward adds into it: several backwards between two steps are deliberate accumulation and not a
boundary); gradients an optimizer step rewrote in place and the program read afterwards (``GradientRewrite``,
pytorch.reads); where the chain breaks when a gradient is missing (``ChainBreak``); and what goes wrong at
the torch<->Warp bridge (pytorch.bridge). Names are the program's (pytorch.names).

Cost: the cadence of the Warp side (observe.cadence) picks the backwards audited in full; the others cost a
counter. A step of a program already on the Warp side counts as an update there too (the boundary of an iteration
is the same for both: the params moved).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

from gradcheck.model.sites import caller_site
from gradcheck.model.trace import DECLARED, LEAF, UPDATED, ChainBreak, PassRecord, Residue
from gradcheck.observe.cadence import ALL
from gradcheck.observe.guard import Guarded
from gradcheck.observe.log import IterationLog
from gradcheck.pytorch.bridge import Bridge
from gradcheck.pytorch.functions import FunctionTests
from gradcheck.pytorch.grad_calls import GradCalls
from gradcheck.pytorch.names import TorchNames
from gradcheck.pytorch.ranks import CrossRanks
from gradcheck.pytorch.reads import ReadWindow
from gradcheck.pytorch.saved_overwrites import SavedOverwrites
from gradcheck.pytorch.steps import Steps
from gradcheck.pytorch.unversioned import UnversionedWrites

MAX_GRAPH_NODES = 20000
MAX_OPEN = 8  # audited backwards whose record waits for a step to say whether their leftovers mattered  # nodes of one backward's graph walked for its leaves and custom Functions


@dataclass
class _Pending:
    """One audited backward, recorded once its gradients' use is over (the next backward, or the end)."""

    index: int
    loss: float | None
    site: str | None
    samples: dict
    described: dict
    residue: tuple = ()
    breaks: tuple = ()
    rewrites: list = field(default_factory=list)


class TorchWatch(Steps, Guarded):
    ROLE = "torch observer"  # what its internal errors are labelled with

    def __init__(self, roots, cadence=ALL, params: dict | None = None) -> None:
        super().__init__()  # Guarded: busy, ignoring(), _guard() and the internal errors
        self.names = TorchNames(roots)
        self.cadence = cadence
        self.log = IterationLog()
        self.backwards = self.audited = 0
        self.notes: list[str] = []
        self.on_exit: list = []
        self.attach_bridge = lambda: None  # set while installed (pytorch.patches.observed)
        self.warp = None  # the Warp side's observer, when the program uses Warp too
        self.devices: dict[str, None] = {}
        self.bridge = Bridge(self)
        self.reads = ReadWindow(self)
        self.functions = FunctionTests(self)  # custom autograd.Functions, each tested once against its forward
        self.grad_calls = GradCalls(self, MAX_GRAPH_NODES)  # torch.autograd.grad calls, audited at the bridge
        self.saved = SavedOverwrites(self)  # tensors torch keeps for a backward, written by Warp behind its back
        self.unversioned = UnversionedWrites(self)  # ... or through .data, .numpy() or a wp.from_torch alias
        self.ranks = CrossRanks(self)  # what differs across the ranks of a DDP job
        self._keys: dict[int, tuple[weakref.ref, str]] = {}
        self._roles: dict[str, str] = {}
        self._last_grad: dict[str, int] = {}  # key -> the last audited backward that left it a gradient
        self._diagnosed: set[str] = set()
        self._pending: _Pending | None = None  # the last audited backward's record, still open
        self._open: list[_Pending] = []  # records not yet logged, oldest first (a suspect may still join them)
        self._window = False  # the last backward was audited: its step and reads are watched
        self._scaled: tuple | None = None  # (weakref to GradScaler.scale's output, the scale it multiplied by)
        self._init_steps()
        self.other_backwards = 0  # backwards of threads other than the audited one
        for key, tensor in (params or {}).items():
            self._key(tensor, key, role=DECLARED)

    # -- plumbing -------------------------------------------------------------------------------------------------
    def installed(self):
        from gradcheck.pytorch.patches import observed

        return observed(self)

    def _key(self, tensor, name: str | None = None, role: str | None = None) -> str:
        entry = self._keys.get(id(tensor))
        if entry is not None and entry[0]() is tensor:
            key = entry[1]
        else:
            key = name or self.names.name(tensor, self.backwards, list(self.optimizers))
            self._keys[id(tensor)] = (weakref.ref(tensor), key)
        if role is not None and self._roles.get(key) != DECLARED:
            self._roles[key] = role
        return key

    def tensors(self) -> dict:
        """key -> live tensor, for every parameter and leaf seen."""
        alive = {}
        for ref, key in list(self._keys.values()):
            tensor = ref()
            if tensor is not None:
                alive[key] = tensor
        return alive

    def name_of(self, tensor) -> str | None:
        entry = self._keys.get(id(tensor))
        if entry is not None and entry[0]() is tensor:
            return entry[1]
        return self.names.known(tensor)

    # -- the bridge and the Warp side ------------------------------------------------------------------------------
    def join(self, observer) -> None:
        """The program uses Warp too: one iteration boundary for both sides, wp.from_torch wrappers named by
        their tensors and judged here (not as Warp leaves of their own), the bridge watched."""
        self.warp = observer
        observer.book.foreign = lambda array: getattr(array, "_tensor", None) is not None
        observer.names.resolvers.append(self._warp_name)

        def before_warp_backward():
            with self._guard("bridge: Warp backward"):
                self.bridge.before_warp_backward()

        observer.before_backward.append(before_warp_backward)
        self.attach_bridge()

    def _warp_name(self, array) -> str | None:
        ptr = getattr(array, "ptr", None)
        owner = self.bridge.grad_owner(ptr) if ptr else None  # a wrapper's gradient: the tensor's .grad
        if owner is not None:
            return owner
        tensor = getattr(array, "_tensor", None)
        return self.name_of(tensor) if tensor is not None else None

    def on_from_torch(self, tensor, array) -> None:
        if not (self.bridge.in_backward or self.cadence.full(self.backwards + 1)):
            return  # the next backward goes unaudited: nothing will ask about this wrapper
        if self.unversioned.armed:
            self.unversioned.taken(tensor, "wp.from_torch")
        with self._guard("wp.from_torch"):
            self.bridge.on_from_torch(tensor, array)

    def on_to_torch(self, array, tensor) -> None:
        if not (self.bridge.in_backward or self.cadence.full(self.backwards + 1)):
            return
        with self._guard("wp.to_torch"):
            self.bridge.on_to_torch(array, tensor)

    def on_function(self, cls, args: tuple, kwargs: dict, run):
        """A custom Function's ``apply`` (``run`` calls it)."""
        watched = not self.bridge.in_backward and self.cadence.full(self.backwards + 1)
        watched = watched and self.functions.audited_thread()
        inputs = None
        if watched:
            with self._guard("custom Function: its inputs"):
                inputs = self.saved.inputs(args)
        result = self.functions.on_apply(cls, args, kwargs, run)
        if watched:
            with self._guard("custom Function: what it returned"):
                self.saved.returned(cls, result, inputs)
        return result

    def on_ddp_forward(self, ddp, made: bool = False) -> None:
        """A DistributedDataParallel model made (``made``) or run forward."""
        if self.own_thread():
            with self._guard("cross-rank checks: DDP forward"):
                self.ranks.on_forward(ddp, made)

    # -- backward -----------------------------------------------------------------------------------------------
    def on_backward(self, tensors, grad_tensors, kwargs: dict, run):
        try:
            return self._on_backward(tensors, grad_tensors, kwargs, run)
        finally:
            if not self.bridge.in_backward and self.own_thread():
                if self.functions.pending:
                    self.functions.settle()  # the program's backward is over: its Functions' tests, on copies
                with self._guard("unversioned aliases"):
                    self.unversioned.rearm()  # after the tests: nodes they made are not the next forward's

    def _on_backward(self, tensors, grad_tensors, kwargs: dict, run):
        if self.bridge.in_backward:  # a backward inside one (reentrant checkpointing) is part of it
            return run()
        if not self.own_thread():  # another thread's is not watched: its .grad is not safe to read from here
            self.other_backwards += 1
            return run()
        if self.ranks.active:
            with self._guard("cross-rank checks"):
                self.ranks.close()  # the last audited step's fingerprints to the other ranks
        self.backwards += 1
        index = self.backwards
        moved, self._moved = self._moved, {}
        self.reads.close()
        if self._suspects:
            with self._guard("leftovers"):
                self.clear_suspects()
        if not self.cadence.full(index):
            self._flush()
            self._window = False
            return run()
        self.audited += 1
        before = None
        with self._guard("before backward"):
            self._flush()
            before = self._before(tensors, moved, index)
        self._window = True
        self.bridge.in_backward = True
        try:
            return run()
        finally:
            self.bridge.in_backward = False
            if before is None:
                self.bridge.release()
                self.saved.after()
            else:
                with self._guard("after backward"):
                    self._after(before, index)

    def on_scale(self, scaled, scale: float) -> None:
        """GradScaler.scale(loss) made ``scaled`` = loss * ``scale``: a backward from it leaves scaled gradients."""
        with self._guard("GradScaler"):
            self._scaled = (weakref.ref(scaled), scale)

    def _before(self, tensors, moved: dict, index: int) -> dict:
        from gradcheck.pytorch.graph import tensors_in, walk
        from gradcheck.pytorch.stats import fingerprint, nonzero_norm

        roots = tensors_in(tensors)
        loss, scale = None, 1.0
        scaled = self._scaled
        if scaled is not None and roots and scaled[0]() is roots[0]:
            scale = scaled[1] or 1.0
        if len(roots) == 1 and roots[0].numel() == 1 and not roots[0].is_complex():
            loss = float(roots[0].detach().reshape(())) / scale
        for root in roots[:1]:
            self.devices.setdefault(str(root.device))
        graph = walk(roots, MAX_GRAPH_NODES)
        held_tensors = self.held()
        held = {id(p) for p in held_tensors}
        tracked, seen = {}, set()
        modules = self.names.module_params() if not self.other_threads else []
        for tensor in [*held_tensors, *graph.leaves, *modules]:
            if id(tensor) not in seen:
                seen.add(id(tensor))
                role = UPDATED if id(tensor) in held else LEAF
                tracked[self._key(tensor, role=role)] = tensor
        for key, tensor in self.tensors().items():
            if self._roles.get(key) == DECLARED:
                tracked.setdefault(key, tensor)
        leftovers = {}
        for key, tensor in tracked.items():
            grad = tensor.grad
            if id(tensor) in moved and self._roles.get(key) != LEAF and grad is not None:
                nonzero, norm = nonzero_norm(grad)
                if nonzero:
                    leftovers[key] = (nonzero, norm, fingerprint(grad), id(grad), moved[id(tensor)])
        self.bridge.before(graph, index)
        self.unversioned.before(graph, index, self.saved.before(graph, index))
        return {
            "loss": loss, "tracked": tracked, "graph": graph, "leftovers": leftovers, "site": caller_site(),
            "scale": scale,
        }  # fmt: skip

    def _after(self, before: dict, index: int) -> None:
        from gradcheck.pytorch.stats import absent, fingerprint, read

        self.bridge.after(index)
        self.saved.after()
        for key, (nonzero, norm, checksum, grad_id, step) in before["leftovers"].items():
            tensor = before["tracked"][key]
            grad = tensor.grad
            kept = grad is not None and id(grad) == grad_id and fingerprint(grad) == checksum
            if not kept and grad is not None:
                fix = (
                    f"call optimizer.zero_grad() after {step} and before the next backward (to accumulate over "
                    "micro-steps, zero at each step: backwards between two steps may add up on purpose)"
                )
                left_by = self._last_grad.get(key, index - 1)
                found = Residue(f"{key}.grad", norm, nonzero, "param", (f"{key}.grad",), left_by, kept, fix)
                self.suspect(tensor, found, index)
        samples, described = {}, {}
        for key, tensor in before["tracked"].items():
            grad = tensor.grad
            samples[key] = absent(index) if grad is None else read(grad, index, before["scale"])
            if samples[key].has_grad and samples[key].nonzero:
                self._last_grad[key] = index
            if not self.log.knows(key):
                value = float(tensor.detach().double().norm()) if tensor.is_floating_point() else float("nan")
                described[key] = (f"{key}.grad", tuple(tensor.shape), str(tensor.dtype).replace("torch.", ""), value)
        breaks = self._breaks(before, samples)
        confirmed, self._confirmed = tuple(self._confirmed), []
        self._pending = _Pending(index, before["loss"], before["site"], samples, described, confirmed, breaks)
        self._open.append(self._pending)
        if self.ranks.active:
            self.ranks.after_backward(index, before["graph"])

    def _breaks(self, before: dict, samples: dict) -> tuple:
        """Where the chain breaks, for each param first seen without a gradient (once a param)."""
        found = []
        for key, sample in samples.items():
            if key in self._diagnosed or (sample.has_grad and sample.nonzero):
                continue
            self._diagnosed.add(key)
            tensor = before["tracked"][key]
            cause = self.bridge.detached(tensor, key) or self.bridge.orphaned(key)
            aliased = self.unversioned.aliased.get(id(tensor))
            if cause is None and id(tensor) not in before["graph"].reached and aliased is not None:
                cause = ChainBreak(
                    param=key, cause="read-through-alias", array=key, launch=None, index=None,
                    detail=f"the forward reads {key} only through {aliased}, which autograd does not record: a value "
                    "the program keeps as a Parameter without learning it (a mask, an index), or a gradient lost",
                    fix=f"if {key} is not meant to be learned, make it a buffer (register_buffer) or set "
                    f"requires_grad=False; else use {key} itself in the computation, not its {aliased}",
                )  # fmt: skip
            if cause is None and id(tensor) not in before["graph"].reached and self.ranks.declared_unused(tensor):
                cause = ChainBreak(
                    param=key, cause="declared-unused", array=key, launch=None, index=None,
                    detail=f"the loss does not reach {key}, a parameter of a DistributedDataParallel model made with "
                    "find_unused_parameters=True: the program says some of its parameters may go unused",
                    fix="nothing",
                )  # fmt: skip
            if cause is None and id(tensor) not in before["graph"].reached:
                cause = ChainBreak(
                    param=key, cause="unreached", array=key, launch=None, index=None,
                    detail=f"the autograd graph of this backward's loss never reaches {key}: nothing it computed "
                    "used it, or it was used under torch.no_grad() or through .detach()/.data",
                    fix=f"use {key} (not a detached copy of it) in the computation the loss comes from; if it is "
                    "not meant to be learned, set requires_grad=False and leave it out of the optimizer",
                )  # fmt: skip
            if cause is None and sample.has_grad and id(tensor) in before["graph"].reached:
                cause = ChainBreak(
                    param=key, cause="zero-derivative", array=key, launch=None, index=None,
                    detail=f"the loss's autograd graph reaches {key} and its gradient is exactly zero: the "
                    "derivative is zero at these values (a bias that a normalisation or the loss itself cancels, a "
                    "saturated activation), or a backward on the way returns zeros for it",
                    fix=f"nothing, if the loss truly does not depend on {key} (then drop it or freeze it); else check "
                    "the backward of the custom Functions on its way",
                )  # fmt: skip
            if cause is not None:
                found.append(cause)
        return tuple(found)

    def _flush(self, everything: bool = False) -> None:
        """Log the open records, oldest first, up to the first one a leftover may still join (at most MAX_OPEN
        stay open); ``everything`` at the end."""
        self._pending = None
        waiting = {suspect[2] for suspect in self._suspects.values()}
        while self._open:
            if not everything and self._open[0].index in waiting and len(self._open) <= MAX_OPEN:
                break
            self._log(self._open.pop(0))

    def _log(self, pending: _Pending) -> None:
        record = PassRecord(
            index=pending.index, loss=pending.loss, launches=0, audited_buffers=0, survivors=(), site=pending.site,
            residue=pending.residue, rewrites=tuple(pending.rewrites), breaks=pending.breaks,
        )  # fmt: skip
        self.log.add(record, pending.samples, pending.described)

    def add_rewrite(self, rewrite) -> None:
        if self._pending is not None:
            self._pending.rewrites.append(rewrite)

    # -- the report ---------------------------------------------------------------------------------------------
    def finish(self) -> None:
        self.reads.close()
        if self.functions.pending:
            self.functions.settle()
        with self._guard("cross-rank checks"):
            said = self.ranks.finish()
            if said:
                self.notes.append(said)
        with self._guard("finish"):
            self._flush(everything=True)
            shared = self.bridge.shared()
            if shared:
                self.notes.append(shared)
            if self.other_backwards:
                self.notes.append(
                    f"{self.other_backwards} torch backward(s) of other threads were not audited (only the thread of "
                    "the first backward is: torch's .grad is not safe to read while another thread writes it)"
                )
        for step in self.on_exit:
            step()

    def trace_fields(self) -> dict:
        roles = {k: r for k, r in sorted(self._roles.items(), key=lambda item: item[1] == LEAF)}
        sampling = None
        if self.audited < self.backwards:
            sampling = self.cadence.describe(self.backwards, self.audited) | {"records_kept": len(self.log.records)}
        return {
            "params": self.log.traces(roles),
            "passes": tuple(self.log.records),
            "fixed_params": False,
            "backwards": self.backwards,
            "iterations": self.backwards,
            "sampling": sampling,
            "internal_errors": tuple(self.internal_errors),
            "bridge": self.bridge.issues(),
            "cross_rank": tuple(self.ranks.found),
        } | ({"launch_checks": tested} if (tested := self.functions.result()) is not None else {})
