"""Reads of a gradient an optimizer step rewrote in place (``mutated-gradient`` on the torch side).

An optimizer that keeps its state in ``.grad`` (AdamW ScheduleFree) or scales it in place during its step leaves
a buffer that whatever reads it next takes for the gradient: a logged norm of ~700 where the true one is below
5. The evidence is the step that changed a ``.grad`` (bit-exact fingerprints before and after it, on audited
backwards), then a torch operation that reads that tensor before the next ``zero_grad()``, backward or step. The
reads are seen through a ``TorchFunctionMode`` pushed only while such a rewritten gradient exists (an optimizer
that leaves ``.grad`` alone, as most of torch's do, never opens the window: nothing is paid; torch's foreach SGD
with momentum does rewrite it), and only when no mode of the program's is active: a mode pushed over the program's
would be popped by the program's own ``with`` exit (``with torch.device(...)``) and leave the program's in place.
An in-place write by the program itself (``p.grad.zero_()``, ``mul_``, ``clip_grad_norm_``'s ``_foreach_mul_``
after its norm) is the program preparing its own buffer: that tensor is no longer watched.

What reads a gradient, as real loops do: a torch operator on it, or on a list of tensors holding it (the
``_foreach_norm`` behind ``clip_grad_norm_`` and ``get_total_norm``, any norm type); and whatever reads an alias or
a copy of it (``.data``, ``detach()``, a view, ``.cpu()``, ``clone()``: TensorBoard's ``add_histogram`` reads
``g.detach().cpu().numpy()``): the alias or copy is watched in its place, since making one reads nothing a report
would show. The reader is named by what the program called (``torch.nn.utils.clip_grad.clip_grad_norm_``), not
by the kernel deep inside it.
"""

from __future__ import annotations

from gradcheck.model.sites import caller_site, short
from gradcheck.model.trace import GradientRewrite

# what a TorchFunctionMode also sees that reads no value: attribute getters, shape queries
_NOT_READS = frozenset(
    {"__get__", "__set__", "size", "dim", "numel", "__len__", "element_size", "stride", "is_contiguous",
     "data_ptr", "untyped_storage", "storage_offset", "is_floating_point", "requires_grad_", "__hash__",
     "__eq__", "__repr__", "__format__", "__str__", "backward", "_group_tensors_by_device_and_dtype"}
)  # fmt: skip
# what gives an alias or a copy of a gradient without reading a value a report would show: watched in its place
_PASSES = frozenset(
    {"detach", "view", "view_as", "reshape", "reshape_as", "flatten", "ravel", "unflatten", "squeeze", "unsqueeze",
     "t", "transpose", "permute", "expand", "expand_as", "narrow", "select", "__getitem__", "contiguous", "cpu",
     "cuda", "to", "type", "float", "double", "half", "bfloat16", "clone", "detach_copy", "as_strided", "unbind",
     "split", "chunk", "movedim", "resolve_conj", "resolve_neg", "data"}  # data: the attribute (_name)
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
                if not (self.active and window._watched) or window._watch.busy:
                    return func(*args, **kwargs)
                following = window._seen(func, args)
                result = func(*args, **kwargs)
                if following:
                    window._follow(result, following)
                return result

        self._torch = torch
        self._mode = _Reads()
        self._mode.__enter__()

    @staticmethod
    def _stack_depth(torch) -> int:
        try:
            return int(torch._C._len_torch_function_stack())
        except Exception:  # noqa: BLE001 - no such API in this torch: take it as busy, open nothing
            return -1

    def _seen(self, func, args) -> list:
        """What a torch call does with the watched gradients among its arguments: reads them (the finding), writes
        one in place (the program's own buffer from now on), or passes them on (the entries to follow into its
        result)."""
        name = _name(func)
        if name in _NOT_READS:
            return []
        found = self._arguments(args)
        if not found:
            return []
        for _position, key, _entry in found:
            del self._watched[key]
        if name.endswith("_") and not name.startswith("__"):
            # an in-place op rewrites its first argument (the program's own buffer from now on: zero_, mul_, the
            # _foreach_mul_ of a clip), and reads the others (``p.add_(p.grad)``)
            found = [item for item in found if item[0] != 0]
        elif name in _PASSES:
            return [entry for _position, _key, entry in found]
        if found:
            with self._watch._guard("gradient read"):
                reader = _reader(func)
                for _position, _key, entry in found:
                    self._record(entry, reader)
        return []

    def _arguments(self, args) -> list:
        """(position, key, entry) of each watched gradient among a call's first arguments, or in a list or tuple of
        them (a foreach kernel's)."""
        found = []
        for position, arg in enumerate(args[:3]):
            for item in arg if isinstance(arg, (list, tuple)) else (arg,):
                entry = self._watched.get(id(item))
                if entry is not None and entry[0] is item:
                    found.append((position, id(item), entry))
        return found

    def _follow(self, result, entries: list) -> None:
        """The alias or copy a passing call gave (a tensor, or several: ``unbind``, ``split``) is watched as the
        gradient it came from; where a call had several watched inputs, as the first of them."""
        for item in result if isinstance(result, (list, tuple)) else (result,):
            if hasattr(item, "data_ptr"):
                grad, subject, produced = entries[0]
                self._watched[id(item)] = (item, subject, produced)

    def _record(self, entry: tuple, reader: str) -> None:
        from gradcheck.pytorch.stats import nonzero_norm

        grad, subject, produced = entry
        _nonzero, read_norm = nonzero_norm(grad)
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


def _name(func) -> str:
    """The op's name; an attribute getter that gives an alias (``.data``) as the attribute's."""
    name = getattr(func, "__name__", "") or ""
    if name == "__get__":
        attribute = getattr(getattr(func, "__self__", None), "__name__", "")
        return attribute if attribute in _PASSES else name  # ``g.data``: an alias
    return name


def _reader(func) -> str:
    """``what (file:line)``: what the program called that read the gradient (``torch.nn.utils.clip_grad.
    clip_grad_norm_``, ``SummaryWriter.add_histogram``), or the op itself when the program called it directly, and
    the program's line."""
    label = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or "a torch operation"
    label = label.replace("TensorBase.", "Tensor.").replace("_VariableFunctionsClass.", "torch.")
    called = _called_by_program()
    if called is not None and not called.startswith("gradcheck."):
        label = f"{called} -> {label}"
    return f"{label} ({short(caller_site())})"


def _called_by_program() -> str | None:
    """``module.function`` of the library function the program's own frame called (decorators' wrappers passed
    over), or None when the program called the op itself."""
    import sys

    from gradcheck.model.sites import is_program_module

    frame, inner = sys._getframe(2), []
    while frame is not None and not is_program_module(frame.f_globals.get("__name__", "") or ""):
        inner.append(frame)
        frame = frame.f_back
    for candidate in reversed(inner):  # from the one the program called, inwards
        code = candidate.f_code
        qualname = getattr(code, "co_qualname", code.co_name)
        if "<locals>" in qualname or "wrapper" in code.co_name or code.co_name.startswith("<"):
            continue
        return f"{candidate.f_globals.get('__name__', '?')}.{qualname}"
    return None
