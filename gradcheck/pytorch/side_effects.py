"""What a custom ``torch.autograd.Function`` may change besides its outputs, kept and put back around its test.

gradcheck tests a Function by running its forward and backward again on copies of its inputs
(gradcheck.pytorch.function_test). The program must not notice: so before the test the state the Function can
reach cheaply is kept, and after it compared and put back.

- ``RandomState``: torch's generators (CPU, and CUDA's once CUDA is initialised), NumPy's global one and Python's
  ``random``. A forward that draws from one of them (dropout) is not a function of its inputs, and the program's
  own stream of random numbers must be exactly what it is without gradcheck: every generator is set back.
- ``Snapshot``: the tensors and Warp arrays (through torch views of their memory and gradient) the Function reaches
  through its class attributes, its module's globals, the closures of its forward and backward and its non-tensor
  arguments (one level into containers, objects and ``nn.Module`` parameters and buffers), plus the program's
  parameters and their ``.grad`` (the watch's): values copied within COPY_BUDGET_BYTES (smallest first; larger ones
  are compared by torch's version counter only), which object each class attribute, global and ``.grad`` is. A
  forward that writes any of them (a running statistic, a buffer, a cached wrapper set on first use) or a backward
  that accumulates into a gradient it was not handed is not tested, and everything is put back.
"""

from __future__ import annotations

import random
import sys
import types

COPY_BUDGET_BYTES = 256 << 20
MAX_OBJECTS = 2048  # tensors followed per Function
MAX_ITEMS = 64  # entries of one container, attributes of one object


class RandomState:
    """Every random generator a forward may draw from, as it is now; ``drawn()`` names those that moved since."""

    def __init__(self) -> None:
        import torch

        self.cpu = torch.get_rng_state()
        self.cuda = torch.cuda.get_rng_state_all() if _cuda_started(torch) else None
        numpy = sys.modules.get("numpy")
        self.numpy = numpy.random.get_state() if numpy is not None else None
        self.python = random.getstate()

    def drawn(self) -> list[str]:
        import torch

        moved = []
        if not torch.equal(torch.get_rng_state(), self.cpu):
            moved.append("torch's CPU generator")
        if self.cuda is not None and any(
            not torch.equal(a, b) for a, b in zip(torch.cuda.get_rng_state_all(), self.cuda)
        ):
            moved.append("torch's CUDA generator")
        if self.numpy is not None:
            now = sys.modules["numpy"].random.get_state()
            if now[2] != self.numpy[2] or not (now[1] == self.numpy[1]).all():
                moved.append("numpy.random")
        if random.getstate() != self.python:
            moved.append("Python's random")
        return moved

    def restore(self) -> None:
        import torch

        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state_all(self.cuda)
        if self.numpy is not None:
            sys.modules["numpy"].random.set_state(self.numpy)
        random.setstate(self.python)


def _cuda_started(torch) -> bool:
    return bool(torch.cuda.is_available() and torch.cuda.is_initialized())


class Snapshot:
    """The state a Function reaches (see the module's docstring), kept to be compared and put back."""

    def __init__(self, cls, arguments: list, program: dict) -> None:
        import torch

        found: dict = {}
        for name, tensor in program.items():
            _collect(found, name, tensor, 1)
        for owner in _own_classes(cls):
            for name, value in list(vars(owner).items()):
                if not name.startswith("__"):
                    _collect(found, f"{owner.__name__}.{name}", value, 0)
        for name, value in _closures(cls):
            _collect(found, name, value, 0)
        module = sys.modules.get(cls.__module__)
        self.namespaces = [(f"{owner.__name__}.", owner) for owner in _own_classes(cls)]
        if module is not None:
            self.namespaces.append(("", module))
            for name, value in list(vars(module).items()):
                if not name.startswith("__") and not isinstance(value, (types.ModuleType, type, types.FunctionType)):
                    _collect(found, name, value, 0)
        for i, value in enumerate(arguments):
            if not isinstance(value, torch.Tensor):
                _collect(found, f"argument #{i}", value, 0)
        self.bindings = [(prefix, owner, dict(vars(owner))) for prefix, owner in self.namespaces]
        self.grads = [(name, t, t.grad) for name, t in found.values() if _is_tensor(t) and t.is_leaf]
        self.values = []  # (name, tensor, copy or None, version)
        budget = COPY_BUDGET_BYTES
        for name, tensor in sorted(found.values(), key=lambda item: _nbytes(item[1])):
            tensors = [(name, tensor)] + ([(f"{name}.grad", tensor.grad)] if tensor.grad is not None else [])
            for label, t in tensors:
                size = _nbytes(t)
                copy = t.detach().clone() if size <= budget else None
                budget -= size if copy is not None else 0
                self.values.append((label, t, copy, t._version))

    def changed(self) -> list[str]:
        """What differs from the snapshot: names of values written, attributes and globals rebound, gradients
        set or replaced."""
        import torch

        found = []
        for label, tensor, copy, version in self.values:
            if copy is None:
                if tensor._version != version:
                    found.append(label)
            elif not torch.equal(tensor.detach(), copy):
                if not (tensor.is_floating_point() and torch.equal(tensor.isnan(), copy.isnan())
                        and torch.equal(tensor.nan_to_num(), copy.nan_to_num())):  # fmt: skip
                    found.append(label)
        for name, tensor, grad in self.grads:
            if tensor.grad is not grad:
                found.append(f"{name}.grad")
        for prefix, owner, before in self.bindings:
            now = vars(owner)
            for key in set(before) | set(now):
                if key.startswith("__") or (key in before and key in now and now[key] is before[key]):
                    continue
                found.append(f"{prefix}{key}")
        return found

    def restore(self) -> None:
        """Everything back as it was: values copied back, gradients and bindings set back."""
        import torch

        with torch.no_grad():
            for _label, tensor, copy, _version in self.values:
                if copy is not None and not torch.equal(tensor.detach(), copy):
                    tensor.copy_(copy)
        for _name, tensor, grad in self.grads:
            if tensor.grad is not grad:
                tensor.grad = grad
        for _prefix, owner, before in self.bindings:
            now = vars(owner)
            for key in [k for k in now if k not in before and not k.startswith("__")]:
                delattr(owner, key) if isinstance(owner, type) else now.pop(key)
            for key, value in before.items():
                if not key.startswith("__") and now.get(key, _MISSING) is not value:
                    setattr(owner, key, value)


_MISSING = object()


def _is_tensor(value) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def _nbytes(tensor) -> int:
    try:
        return int(tensor.numel() * tensor.element_size())
    except Exception:  # noqa: BLE001 - sparse or meta: nothing to copy
        return 0


def _own_classes(cls) -> list:
    """The Function's class and its bases up to torch's own."""
    return [c for c in cls.__mro__ if not (c.__module__ or "").startswith("torch") and c is not object]


def _closures(cls) -> list[tuple[str, object]]:
    """(name, value) of the free variables of the Function's forward, backward and setup_context."""
    found = []
    for method in ("forward", "backward", "setup_context", "vjp"):
        function = getattr(getattr(cls, method, None), "__func__", getattr(cls, method, None))
        code, cells = getattr(function, "__code__", None), getattr(function, "__closure__", None)
        if code is None or not cells:
            continue
        for name, cell in zip(code.co_freevars, cells):
            try:
                found.append((name, cell.cell_contents))
            except ValueError:  # an empty cell
                continue
    return found


def _collect(found: dict, name: str, value, depth: int) -> None:
    """Add the tensors ``value`` holds (itself, a Warp array's views, a module's parameters and buffers, one level
    into containers and objects) to ``found`` (id -> (name, tensor))."""
    import torch

    from gradcheck.warp_compat.torch_interop import torch_views

    if len(found) >= MAX_OBJECTS:
        return
    if isinstance(value, torch.Tensor):
        if value.layout == torch.strided:
            found.setdefault(id(value), (name, value))
        return
    views = torch_views(value)
    if views is not None:
        for suffix, view in views:  # the views' own grads are None: the array's gradient is its own entry
            found.setdefault(("warp", id(value), suffix), (name + suffix, view))
        return
    if isinstance(value, torch.nn.Module):
        for key, tensor in [*value.named_parameters(), *value.named_buffers()][:MAX_OBJECTS]:
            _collect(found, f"{name}.{key}", tensor, 1)
        return
    if depth >= 1 or isinstance(value, (str, bytes, int, float, type, types.ModuleType, types.FunctionType)):
        return
    if isinstance(value, (list, tuple)):
        items = [(f"{name}[{i}]", item) for i, item in enumerate(value[:MAX_ITEMS])]
    elif isinstance(value, dict):
        items = [(f"{name}[{key!r}]", item) for key, item in list(value.items())[:MAX_ITEMS]]
    elif hasattr(value, "__dict__"):
        items = [(f"{name}.{key}", item) for key, item in list(vars(value).items())[:MAX_ITEMS]]
    else:
        return
    for label, item in items:
        _collect(found, label, item, depth + 1)
