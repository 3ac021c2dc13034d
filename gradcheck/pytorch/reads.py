"""Reads of a gradient an optimizer step rewrote in place (``mutated-gradient`` on the torch side).

An optimizer that keeps its state in ``.grad`` (AdamW ScheduleFree) or scales it in place during its step leaves
a buffer that whatever reads it next takes for the gradient: a logged norm of ~700 where the true one is below
5. The evidence is the step that changed a ``.grad`` (bit-exact fingerprints before and after it, on audited
backwards), then a torch operation that reads that tensor before the next ``zero_grad()``, backward or step. The
reads are seen through a ``TorchFunctionMode`` pushed only while such a rewritten gradient exists (an optimizer
that leaves ``.grad`` alone, as most of torch's do, never opens the window: nothing is paid; torch's foreach SGD
with momentum does rewrite it), and only when no mode of the program's is active: a mode pushed over the program's
would be popped by the program's own ``with`` exit (``with torch.device(...)``) and leave the program's in place.
An in-place write by the program itself (``p.grad.zero_()``, ``mul_``) is the program preparing its own buffer:
that tensor is no longer watched.
"""

from __future__ import annotations

from gradcheck.model.sites import caller_site, short
from gradcheck.model.trace import GradientRewrite

# what a TorchFunctionMode also sees that reads no value: attribute getters, shape queries
_NOT_READS = frozenset(
    {"__get__", "__set__", "size", "dim", "numel", "__len__", "element_size", "stride", "is_contiguous",
     "data_ptr", "untyped_storage", "storage_offset", "is_floating_point", "requires_grad_", "__hash__",
     "__eq__", "__repr__", "__format__", "__str__", "backward"}
)  # fmt: skip


class ReadWindow:
    def __init__(self, watch) -> None:
        self._watch = watch
        self._watched: dict[int, tuple] = {}  # id(grad) -> (grad, subject, produced norm)
        self._writer = ""
        self._mode = None
        self._stale: list = []  # modes of ours switched off but under a program's mode when closed

    def open(self, rewritten: dict, writer: str) -> None:
        import torch
        from torch.overrides import TorchFunctionMode

        self.close()
        if self._stack_depth(torch) != 0:
            return  # a mode of the program's is active: never push over it (or under a stale one of ours)
        self._watched, self._writer = dict(rewritten), writer
        window = self

        class _Reads(TorchFunctionMode):
            active = True

            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                if self.active and window._watched and not window._watch.busy:
                    window._seen(func, args)
                return func(*args, **kwargs)

        self._torch = torch
        self._mode = _Reads()
        self._mode.__enter__()

    @staticmethod
    def _stack_depth(torch) -> int:
        try:
            return int(torch._C._len_torch_function_stack())
        except Exception:  # noqa: BLE001 - no such API in this torch: take it as busy, open nothing
            return -1

    def _seen(self, func, args) -> None:
        name = getattr(func, "__name__", "") or ""
        if name in _NOT_READS:
            return
        for arg in args[:3]:
            entry = self._watched.get(id(arg))
            if entry is None or entry[0] is not arg:
                continue
            del self._watched[id(arg)]
            if name.endswith("_") and not name.startswith("__") and arg is args[0]:
                continue  # the program rewrites it itself (zero_, mul_): its own business
            with self._watch._guard("gradient read"):
                self._record(entry, func)

    def _record(self, entry: tuple, func) -> None:
        from gradcheck.pytorch.stats import nonzero_norm

        grad, subject, produced = entry
        _nonzero, read_norm = nonzero_norm(grad)
        label = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or "a torch operation"
        reader = f"{label.replace('TensorBase.', 'Tensor.')} ({short(caller_site())})"
        self._watch.add_rewrite(GradientRewrite(subject, self._writer, reader, produced, read_norm))

    def close(self) -> None:
        """Pop our mode when it is on top; else (a program's mode was pushed over it and is still active) switch it
        off and pop it when it surfaces (the next open or close)."""
        self._watched = {}
        torch = getattr(self, "_torch", None)
        if torch is None:
            return
        for mode in [m for m in (self._mode, *self._stale) if m is not None]:
            mode.active = False
            if self._on_top(torch, mode):
                mode.__exit__(None, None, None)
                if mode in self._stale:
                    self._stale.remove(mode)
            elif mode is self._mode and len(self._stale) < 16:
                self._stale.append(mode)
        self._mode = None

    def _on_top(self, torch, mode) -> bool:
        depth = self._stack_depth(torch)
        try:
            return depth > 0 and torch._C._get_function_stack_at(depth - 1) is mode
        except Exception:  # noqa: BLE001
            return False
