"""The torch side's view of the optimizers: what they hold, what their steps move, and what their steps did to
``.grad`` (a mixin of pytorch.watch.TorchWatch).

- A tensor an optimizer holds and that requires grad is a parameter (role ``updated``); a frozen one
  (``requires_grad=False``, left in the optimizer as fine-tuning code does: torch skips it) is not.
- A step moves *its own* parameters: the boundary of an iteration is per parameter, so a head stepped every
  micro-batch beside a backbone that accumulates over four is no boundary for the backbone.
- A leftover a backward added to (the parameter moved, ``.grad`` not cleared) is a *suspect* until the optimizer
  holding the parameter steps on it: cleared before that step (``zero_grad()``, ``p.grad = None``,
  ``p.grad.zero_()``), it did no harm (a GAN's generator backward adds into the discriminator's stale ``.grad``,
  which the next ``optimizerD.zero_grad()`` clears).
- A step that changed ``.grad`` (bit-exact fingerprints before and after) opens the read window
  (pytorch.reads), unless the step ran backwards of its own (LBFGS's closure) or is GradScaler's (a fused
  optimizer unscales ``.grad`` in place: what is read afterwards is the true gradient).
- Only the thread that made the first audited backward is watched: torch's ``.grad`` is not safe to read while
  another thread's backward writes it.
"""

from __future__ import annotations

import threading
import weakref

from gradcheck.model.sites import caller_site, short


def params_of(owner) -> set[int]:
    """id() of the tensors a zero_grad() call clears: an optimizer's param groups, or a module's parameters."""
    groups = getattr(owner, "param_groups", None)
    if groups is not None:
        return {id(p) for group in groups for p in group["params"]}
    parameters = getattr(owner, "parameters", None)
    return {id(p) for p in parameters()} if callable(parameters) else set()


class Steps:
    def _init_steps(self) -> None:
        self.optimizers: weakref.WeakSet = weakref.WeakSet()
        self._made_in: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # optimizer -> the thread that made it
        self._moved: dict[int, str] = {}  # id(param) -> the step that moved it since the last backward
        self._before_step: dict[int, int] = {}
        self._step_backwards = 0  # backwards counted when the step began (LBFGS runs its own inside the step)
        self._suspects: dict[int, tuple] = {}  # id(param) -> (Residue, weakref to that .grad, backward index)
        self._confirmed: list = []  # confirmed after their backward's record was closed: go into the next one
        self.scaler_step = False  # inside GradScaler.step (pytorch.patches)
        self._thread: int | None = None  # the thread audited (its first backward's)
        self.other_threads = False

    def own_thread(self) -> bool:
        """This call comes from the audited thread (the first to call backward)."""
        ident = threading.get_ident()
        if self._thread is None:
            self._thread = ident
        if ident != self._thread:
            self.other_threads = True
            return False
        return True

    # -- what the optimizers hold ---------------------------------------------------------------------------------
    def on_optimizer(self, optimizer) -> None:
        with self._guard("optimizer"):
            ident = threading.get_ident()
            self._made_in[optimizer] = ident
            if any(made != ident for made in self._made_in.values()):
                self.other_threads = True  # optimizers of several threads: only the audited thread's are read
            self.optimizers.add(optimizer)

    def held(self) -> list:
        """The audited thread's optimizers' parameters that require grad."""
        return [
            p
            for opt in list(self.optimizers)
            if self._made_in.get(opt, self._thread) == self._thread
            for group in opt.param_groups
            for p in group["params"]
            if p.requires_grad
        ]

    # -- steps --------------------------------------------------------------------------------------------------
    def before_step(self, optimizer) -> None:
        if self.busy or not self.own_thread():
            return
        self.optimizers.add(optimizer)  # one made before the watch started is known from its first step
        self._made_in.setdefault(optimizer, threading.get_ident())
        self._step_backwards = self.backwards
        if self._suspects:
            with self._guard("step: leftovers"):
                self._confirm(optimizer)
        if self.ranks.window is not None:
            with self._guard("cross-rank checks: step"):
                self.ranks.before_step(optimizer)
        if not self._window:
            return
        from gradcheck.pytorch.stats import fingerprint

        with self._guard("step"):
            params = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
            self._before_step = {id(p.grad): fingerprint(p.grad) for p in params}
            self._supplied(params)

    def _supplied(self, params: list) -> None:
        """Tensors the last audited backward left without a gradient that have one as the optimizer steps: the
        program computed it itself (an XNOR-Net's hand-written gradient for its full-precision weights), so no
        gradient is missing (missing-gradient: cause ``supplied``)."""
        pending = self._pending
        if pending is None or pending.index != self.backwards:
            return
        from gradcheck.model.trace import ChainBreak

        for p in params:
            key = self.name_of(p)
            sample = pending.samples.get(key) if key is not None else None
            if sample is None or sample.has_grad:
                continue
            others = tuple(b for b in pending.breaks if b.param != key)
            pending.breaks = (*others, ChainBreak(
                param=key, cause="supplied", array=key, launch=None, index=None,
                detail=f"backward leaves {key}.grad None and the program sets it before the optimizer steps",
                fix="nothing: the optimizer steps on the gradient the program computed",
            ))  # fmt: skip

    def after_step(self, optimizer) -> None:
        if self.busy or not self.own_thread():
            return
        if self.warp is not None:
            self.warp.note_update()  # the params moved: a new iteration on the Warp side too
        if self.ranks.window is not None and self.ranks.window.stepping:
            with self._guard("cross-rank checks: step"):
                self.ranks.after_step(optimizer)
        audit_next = self.cadence.full(self.backwards + 1)
        if not (audit_next or self._window):
            return  # between audited windows a step costs this much (its site is a walk of the stack)
        label = f"{type(optimizer).__name__}.step() ({short(caller_site())})"
        if audit_next:  # what moved matters to the next backward only if it is audited (its leftovers)
            for group in optimizer.param_groups:
                for p in group["params"]:
                    self._moved[id(p)] = label
        before, self._before_step = self._before_step, {}
        if not self._window or not before or self.backwards != self._step_backwards or self.scaler_step:
            return  # LBFGS's closure set .grad itself; GradScaler's fused step unscales it in place
        from gradcheck.pytorch.stats import fingerprint

        with self._guard("step"):
            rewritten = {}
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is not None and id(g) in before and fingerprint(g) != before[id(g)]:
                        rewritten[id(g)] = (g, self._key(p) + ".grad", self._produced_norm(p))
            if rewritten:
                self.reads.open(rewritten, label)

    def _produced_norm(self, tensor) -> float:
        pending = self._pending
        key = self.name_of(tensor)
        if pending is None or key not in pending.samples:
            return float("nan")
        return pending.samples[key].norm

    def on_zero_grad(self, owner) -> None:
        if not self.own_thread():
            return
        self.reads.close()
        if self._suspects:
            with self._guard("zero_grad"):
                covered = params_of(owner)
                for key in [k for k in self._suspects if k in covered]:
                    del self._suspects[key]

    # -- leftovers ----------------------------------------------------------------------------------------------
    def suspect(self, tensor, residue, index: int) -> None:
        self._suspects[id(tensor)] = (residue, weakref.ref(tensor.grad), index, weakref.ref(tensor))

    def clear_suspects(self) -> None:
        """A backward starts: a suspect whose ``.grad`` was replaced or zeroed since is gone."""
        from gradcheck.pytorch.stats import nonzero_norm

        for key, (_residue, grad_ref, _index, param_ref) in list(self._suspects.items()):
            param = param_ref()
            grad = getattr(param, "grad", None)
            if grad is None or grad_ref() is not grad or not nonzero_norm(grad)[0]:
                del self._suspects[key]

    def _confirm(self, optimizer) -> None:
        """The optimizer steps on gradients that still hold a leftover a backward added to: the finding."""
        from gradcheck.pytorch.stats import nonzero_norm

        for group in optimizer.param_groups:
            for p in group["params"]:
                suspect = self._suspects.pop(id(p), None)
                if suspect is None or suspect[3]() is not p or p.grad is None or suspect[1]() is not p.grad:
                    continue
                if not nonzero_norm(p.grad)[0]:
                    continue
                record = next((r for r in self._open if r.index == suspect[2]), None)
                if record is not None:
                    record.residue = (*record.residue, suspect[0])
                else:
                    self._confirmed.append(suspect[0])
