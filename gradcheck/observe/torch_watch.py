"""The torch side of the observer: each ``loss.backward()`` of a PyTorch program audited as a ``tape.backward`` is.

``gradcheck exec`` on a training loop that runs PyTorch's autograd (with Warp kernels inside a
``torch.autograd.Function``, or none at all) records, per backward, the same evidence the Warp side records and
hands it to the same checks in the same records (gradcheck.model.trace): an iteration is one torch backward; a
parameter is a tensor an optimizer holds (role ``updated``) or a leaf the loss reaches / a module parameter that
requires grad (role ``leaf``); its gradient's statistics after backward (probes.torch_stats); leftovers across an
optimizer step (``Residue``: the step moved the params and nothing cleared ``.grad`` before the next backward, so
this backward adds into it: several backwards between two steps are deliberate accumulation and not a
boundary); gradients an optimizer step rewrote in place and the program read afterwards (``GradientRewrite``,
observe.torch_reads); where the chain breaks when a gradient is missing (``ChainBreak``); and what goes wrong at
the torch<->Warp bridge (observe.torch_bridge). Names are the program's (observe.torch_names).

Cost: the cadence of the Warp side (observe.cadence) picks the backwards audited in full; the others cost a
counter. A step of a program already on the Warp side counts as an update there too (the boundary of an iteration
is the same for both: the params moved).
"""

from __future__ import annotations

import contextlib
import weakref
from dataclasses import dataclass, field

from gradcheck.model.trace import DECLARED, LEAF, UPDATED, ChainBreak, InternalError, PassRecord, Residue
from gradcheck.observe.cadence import ALL
from gradcheck.observe.log import IterationLog
from gradcheck.observe.torch_bridge import Bridge
from gradcheck.observe.torch_names import TorchNames
from gradcheck.observe.torch_reads import ReadWindow
from gradcheck.probes.sites import caller_site, short

MAX_INTERNAL_ERRORS = 20
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


class TorchWatch:
    def __init__(self, roots, cadence=ALL, params: dict | None = None) -> None:
        self.names = TorchNames(roots)
        self.cadence = cadence
        self.log = IterationLog()
        self.optimizers: weakref.WeakSet = weakref.WeakSet()
        self.backwards = self.audited = 0
        self.internal_errors: list[InternalError] = []
        self.notes: list[str] = []
        self.on_exit: list = []
        self.attach_bridge = lambda: None  # set while installed (probes.torch_compat.observed)
        self.warp = None  # the Warp side's observer, when the program uses Warp too
        self.devices: dict[str, None] = {}
        self.bridge = Bridge(self)
        self.reads = ReadWindow(self)
        self._depth = 0
        self._stepped: str | None = None  # the step that moved params since the last backward ("SGD.step() (x.py:3)")
        self._keys: dict[int, tuple[weakref.ref, str]] = {}
        self._roles: dict[str, str] = {}
        self._last_grad: dict[str, int] = {}  # key -> the last audited backward that left it a gradient
        self._diagnosed: set[str] = set()
        self._pending: _Pending | None = None  # the last audited backward's record, still open
        self._open: list[_Pending] = []  # records not yet logged, oldest first (a suspect may still join them)
        self._window = False  # the last backward was audited: its step and reads are watched
        self._before_step: dict[int, int] = {}
        self._step_backwards = 0  # backwards counted when the step began (LBFGS runs its own inside the step)
        # leftovers a backward added to, judged when the optimizer holding the param steps on them (a zero_grad()
        # before that step makes them harmless: a GAN's generator backward adds into the discriminator's stale
        # .grad, which the next optimizerD.zero_grad() clears): id(param) -> (Residue, id of that .grad)
        self._suspects: dict[int, tuple] = {}
        self._confirmed: list = []  # confirmed after their backward's record was closed: go into the next one
        for key, tensor in (params or {}).items():
            self._key(tensor, key, role=DECLARED)

    # -- plumbing -------------------------------------------------------------------------------------------------
    @property
    def busy(self) -> bool:
        return self._depth > 0

    @contextlib.contextmanager
    def ignoring(self):
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1

    @contextlib.contextmanager
    def _guard(self, component: str):
        self._depth += 1
        try:
            yield
        except Exception as exc:  # noqa: BLE001 - gradcheck's own failure must not end or change the program
            found = InternalError.of(f"torch observer: {component}", exc)
            if len(self.internal_errors) < MAX_INTERNAL_ERRORS and found.error not in {
                e.error for e in self.internal_errors
            }:
                self.internal_errors.append(found)
        finally:
            self._depth -= 1

    def installed(self):
        from gradcheck.probes.torch_compat import observed

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
        original = observer.on_backward

        def on_backward(tape, loss, grads, run):
            with self._guard("bridge: Warp backward"):
                self.bridge.before_warp_backward()
            return original(tape, loss, grads, run)

        observer.on_backward = on_backward
        self.attach_bridge()

    def _warp_name(self, array) -> str | None:
        ptr = getattr(array, "ptr", None)
        owner = self.bridge.grad_owner(ptr) if ptr else None  # a wrapper's gradient: the tensor's .grad
        if owner is not None:
            return owner
        tensor = getattr(array, "_tensor", None)
        return self.name_of(tensor) if tensor is not None else None

    def on_from_torch(self, tensor, array, requires_grad) -> None:
        if not (self.bridge.in_backward or self.cadence.full(self.backwards + 1)):
            return  # the next backward goes unaudited: nothing will ask about this wrapper
        with self._guard("wp.from_torch"):
            self.bridge.on_from_torch(tensor, array, requires_grad)

    def on_to_torch(self, array, tensor) -> None:
        if not (self.bridge.in_backward or self.cadence.full(self.backwards + 1)):
            return
        with self._guard("wp.to_torch"):
            self.bridge.on_to_torch(array, tensor)

    # -- optimizers ---------------------------------------------------------------------------------------------
    def on_optimizer(self, optimizer) -> None:
        with self._guard("optimizer"):
            self.optimizers.add(optimizer)

    def held(self) -> list:
        return [p for opt in list(self.optimizers) for group in opt.param_groups for p in group["params"]]

    def before_step(self, optimizer) -> None:
        if self.busy:
            return
        self.optimizers.add(optimizer)  # one made before the watch started is known from its first step
        self._step_backwards = self.backwards
        if self._suspects:
            with self._guard("step: leftovers"):
                self._confirm(optimizer)
        if not self._window:
            return
        from gradcheck.probes.torch_stats import fingerprint

        with self._guard("step"):
            params = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
            self._before_step = {id(p.grad): fingerprint(p.grad) for p in params}

    def after_step(self, optimizer) -> None:
        if self.busy:
            return
        self._stepped = f"{type(optimizer).__name__}.step() ({short(caller_site())})"
        if self.warp is not None:
            self.warp.note_update()  # the params moved: a new iteration on the Warp side too
        if not self._window or not self._before_step or self.backwards != self._step_backwards:
            self._before_step = {}  # a step that ran backwards of its own (LBFGS's closure) set .grad itself
            return
        from gradcheck.probes.torch_stats import fingerprint

        with self._guard("step"):
            rewritten = {}
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is not None and id(g) in self._before_step and fingerprint(g) != self._before_step[id(g)]:
                        produced = self._produced_norm(p)
                        rewritten[id(g)] = (g, self._key(p) + ".grad", produced)
            self._before_step = {}
            if rewritten:
                self.reads.open(rewritten, self._stepped)

    def _produced_norm(self, tensor) -> float:
        pending = self._pending
        key = self.name_of(tensor)
        if pending is None or key not in pending.samples:
            return float("nan")
        return pending.samples[key].norm

    def on_zero_grad(self, owner) -> None:
        self.reads.close()
        if self._suspects:
            with self._guard("zero_grad"):
                covered = _params_of(owner)
                for key in [k for k in self._suspects if k in covered]:
                    del self._suspects[key]

    def _confirm(self, optimizer) -> None:
        """The optimizer steps on gradients that still hold a leftover a backward added to: the finding."""
        from gradcheck.probes.torch_stats import nonzero_norm

        for group in optimizer.param_groups:
            for p in group["params"]:
                suspect = self._suspects.pop(id(p), None)
                if suspect is None or p.grad is None or id(p.grad) != suspect[1] or not nonzero_norm(p.grad)[0]:
                    continue
                record = next((r for r in self._open if r.index == suspect[2]), None)
                if record is not None:
                    record.residue = (*record.residue, suspect[0])
                else:
                    self._confirmed.append(suspect[0])

    # -- backward -----------------------------------------------------------------------------------------------
    def on_backward(self, tensors, grad_tensors, kwargs: dict, run):
        if self.bridge.in_backward:  # a backward inside one (torch.utils.checkpoint's reentrant segments): its part
            return run()
        self.backwards += 1
        index = self.backwards
        boundary, self._stepped = self._stepped, None
        self.reads.close()
        if not self.cadence.full(index):
            self._flush()
            self._window = False
            return run()
        self.audited += 1
        before = None
        with self._guard("before backward"):
            self._flush()
            before = self._before(tensors, boundary, index)
        self._window = True
        self.bridge.in_backward = True
        try:
            return run()
        finally:
            self.bridge.in_backward = False
            if before is not None:
                with self._guard("after backward"):
                    self._after(before, index)

    def _before(self, tensors, boundary: str | None, index: int) -> dict:
        import torch

        from gradcheck.probes.torch_graph import walk
        from gradcheck.probes.torch_stats import fingerprint, nonzero_norm

        roots = [tensors] if isinstance(tensors, torch.Tensor) else [t for t in tensors if isinstance(t, torch.Tensor)]
        loss = None
        if len(roots) == 1 and roots[0].numel() == 1:
            loss = float(roots[0].detach().reshape(()))
        for root in roots[:1]:
            self.devices.setdefault(str(root.device))
        graph = walk(roots, MAX_GRAPH_NODES)
        held_tensors = self.held()
        held = {id(p) for p in held_tensors}
        tracked, seen = {}, set()
        for tensor in [*held_tensors, *graph.leaves, *self.names.module_params()]:
            if id(tensor) not in seen:
                seen.add(id(tensor))
                role = UPDATED if id(tensor) in held else LEAF
                tracked[self._key(tensor, role=role)] = tensor
        for key, tensor in self.tensors().items():
            if self._roles.get(key) == DECLARED:
                tracked.setdefault(key, tensor)
        leftovers = {}
        if boundary is not None:
            for key, tensor in tracked.items():
                grad = tensor.grad
                if self._roles.get(key) != LEAF and grad is not None:
                    nonzero, norm = nonzero_norm(grad)
                    if nonzero:
                        leftovers[key] = (nonzero, norm, fingerprint(grad), id(grad))
        self.bridge.before(graph, index)
        return {
            "loss": loss, "tracked": tracked, "graph": graph, "leftovers": leftovers, "site": caller_site(),
            "boundary": boundary,
        }  # fmt: skip

    def _after(self, before: dict, index: int) -> None:
        from gradcheck.probes.torch_stats import absent, fingerprint, read

        self.bridge.after(index)
        for key, (nonzero, norm, checksum, grad_id) in before["leftovers"].items():
            grad = before["tracked"][key].grad
            kept = grad is not None and id(grad) == grad_id and fingerprint(grad) == checksum
            left_by = self._last_grad.get(key, index - 1)
            fix = (
                f"call optimizer.zero_grad() after {before['boundary']} and before the next backward (to accumulate "
                "over micro-steps, zero at each step: backwards between two steps may add up on purpose)"
            )
            if not kept and grad is not None:
                found = Residue(f"{key}.grad", norm, nonzero, "param", (f"{key}.grad",), left_by, kept, fix)
                self._suspects[id(before["tracked"][key])] = (found, id(grad), index)
        samples, described = {}, {}
        for key, tensor in before["tracked"].items():
            grad = tensor.grad
            samples[key] = absent(index) if grad is None else read(grad, index)
            if samples[key].has_grad and samples[key].nonzero:
                self._last_grad[key] = index
            if not self.log.knows(key):
                value = float(tensor.detach().double().norm()) if tensor.is_floating_point() else float("nan")
                described[key] = (f"{key}.grad", tuple(tensor.shape), str(tensor.dtype).replace("torch.", ""), value)
        breaks = self._breaks(before, samples)
        confirmed, self._confirmed = tuple(self._confirmed), []
        self._pending = _Pending(index, before["loss"], before["site"], samples, described, confirmed, breaks)
        self._open.append(self._pending)

    def _breaks(self, before: dict, samples: dict) -> tuple:
        """Where the chain breaks, for each param first seen without a gradient (once a param)."""
        found = []
        for key, sample in samples.items():
            if key in self._diagnosed or (sample.has_grad and sample.nonzero):
                continue
            self._diagnosed.add(key)
            tensor = before["tracked"][key]
            cause = self.bridge.detached(tensor, key) or self.bridge.orphaned(key)
            if cause is None and id(tensor) not in before["graph"].reached:
                cause = ChainBreak(
                    param=key, cause="unreached", array=key, launch=None, index=None,
                    detail=f"the autograd graph of this backward's loss never reaches {key}: nothing it computed "
                    "used it, or it was used under torch.no_grad() or through .detach()/.data",
                    fix=f"use {key} (not a detached copy of it) in the computation the loss comes from; if it is "
                    "not meant to be learned, set requires_grad=False and leave it out of the optimizer",
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
        with self._guard("finish"):
            self._flush(everything=True)
            shared = self.bridge.shared()
            if shared:
                self.notes.append(shared)
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
        }


def _params_of(owner) -> set[int]:
    """id() of the tensors a zero_grad() call clears: an optimizer's param groups, or a module's parameters."""
    groups = getattr(owner, "param_groups", None)
    if groups is not None:
        return {id(p) for group in groups for p in group["params"]}
    parameters = getattr(owner, "parameters", None)
    return {id(p) for p in parameters()} if callable(parameters) else set()
