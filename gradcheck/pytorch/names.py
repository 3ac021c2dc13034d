"""Names for the tensors a PyTorch program trains, as its code spells them: ``model.encoder.weight``.

A finding about ``tensor#3`` is not actionable. The program's modules say where each parameter lives
(``named_parameters`` under the name the program holds the module by); tensors it holds directly (a ``w`` with
``requires_grad=True``) are named by their variable; what neither reaches is named by the optimizer that holds it
(``SGD.param_groups[0][3]``), else by its shape. Names are keyed by the tensor (a weak reference: the name never
keeps a tensor alive) and kept for the run, so a parameter's history stays under one subject; the program is
walked again only when a tensor nobody named yet turns up, at most once a backward.
"""

from __future__ import annotations

import itertools
import weakref

MAX_ITEMS = 64  # items of one list, tuple or dict looked at
DEPTH = 3  # attribute hops from a root: trainer.model.encoder
MAX_MODULE_PARAMS = 4096


class TorchNames:
    def __init__(self, roots) -> None:
        self._roots = roots  # () -> list of {name: object}, long-lived first (observe.program_roots.stack_roots)
        self._memo: dict[int, tuple[weakref.ref, str]] = {}
        self._walked_at = -1
        self._taken: set[str] = set()
        self._module_params: dict[int, weakref.ref] = {}  # every module parameter that requires grad, found by walks

    def known(self, tensor) -> str | None:
        entry = self._memo.get(id(tensor))
        if entry is not None and entry[0]() is tensor:
            return entry[1]
        return None

    def name(self, tensor, backward: int, optimizers=()) -> str:
        """The tensor's name; a miss walks the program (once per ``backward``), then falls back to the optimizer
        that holds it, then to its shape."""
        found = self.known(tensor)
        if found is not None:
            return found
        if self._walked_at != backward:
            self._walked_at = backward
            self._walk()
            found = self.known(tensor)
            if found is not None:
                return found
        return self._give(tensor, _fallback(tensor, optimizers))

    def module_params(self) -> list:
        """The module parameters that require grad, found by the walks so far (alive)."""
        alive = []
        for key, ref in list(self._module_params.items()):
            param = ref()
            if param is None:
                del self._module_params[key]
            elif param.requires_grad:
                alive.append(param)
        return alive

    def _give(self, tensor, name: str) -> str:
        unique, k = name, 1
        while unique in self._taken:
            k += 1
            unique = f"{name}~{k}"
        self._taken.add(unique)
        try:
            self._memo[id(tensor)] = (weakref.ref(tensor), unique)
        except TypeError:
            pass
        return unique

    def _walk(self) -> None:
        import torch

        seen: set[int] = set()
        for group in self._roots():
            for key, value in list(group.items()):
                if not key.startswith("__"):
                    try:
                        self._visit(torch, value, key, DEPTH, seen)
                    except Exception:  # noqa: BLE001 - an object that will not be walked keeps its tensors unnamed
                        continue

    def _visit(self, torch, value, path: str, depth: int, seen: set[int]) -> None:
        if id(value) in seen or depth < 0:
            return
        seen.add(id(value))
        if isinstance(value, torch.nn.Module):
            try:
                named = list(value.named_parameters(prefix=path, remove_duplicate=True))
            except TypeError:  # a module overriding named_parameters with an older signature
                named = list(value.named_parameters(prefix=path))
            for name, param in named:
                if self.known(param) is None:
                    self._give(param, name)
                if param.requires_grad and len(self._module_params) < MAX_MODULE_PARAMS:
                    self._module_params[id(param)] = weakref.ref(param)
            return
        if isinstance(value, torch.Tensor):
            if value.requires_grad and value.is_leaf and self.known(value) is None:
                self._give(value, path)
            return
        if isinstance(value, torch.optim.Optimizer) or depth == 0:
            return
        if isinstance(value, dict):
            for k, item in itertools.islice(value.items(), MAX_ITEMS):
                if isinstance(k, str):
                    self._visit(torch, item, f"{path}[{k!r}]", depth - 1, seen)
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(itertools.islice(value, MAX_ITEMS)):
                self._visit(torch, item, f"{path}[{i}]", depth - 1, seen)
        elif type(value).__module__ not in ("builtins",) and hasattr(value, "__dict__") and not isinstance(value, type):
            try:
                attrs = vars(value)
            except TypeError:
                return
            for k, item in itertools.islice(attrs.items(), MAX_ITEMS):
                if not k.startswith("__"):
                    self._visit(torch, item, f"{path}.{k}", depth - 1, seen)


def _fallback(tensor, optimizers) -> str:
    for optimizer in optimizers:
        for g, group in enumerate(optimizer.param_groups):
            for i, param in enumerate(group["params"]):
                if param is tensor:
                    return f"{type(optimizer).__name__}.param_groups[{g}][{i}]"
    return f"tensor{tuple(tensor.shape)}"
