"""Where gradcheck meets a running PyTorch program: backward, the optimizers, zero_grad, and the torch<->Warp bridge.

The torch side of the observer (gradcheck.pytorch.watch) sees a program only through the hooks installed
here, as the Warp side sees Warp through gradcheck.warp_compat.hooks:

- ``torch.autograd.backward`` (``Tensor.backward`` calls it): the watch is called *around* it (``run`` to call);
- ``torch.autograd.grad``: audited at the bridge (pytorch.grad_calls);
- every optimizer's ``step`` (torch's global step pre/post hooks) and ``zero_grad``, and ``Module.zero_grad``;
- optimizers as they are made (``Optimizer.__init__``): which tensors a program trains;
- ``torch.autograd.Function.apply``: the first call of each custom Function, to test it against its own forward;
- ``wp.from_torch`` and ``wp.to_torch`` (patched by warp_compat.torch_interop): which torch tensor and
  Warp array share memory, and where;
- ``DistributedDataParallel.__init__`` and ``forward``: the DDP models a job trains, and whether a forward
  all-reduces, for the cross-rank checks (pytorch.ranks);
- ``Tensor.data`` (read and assigned) and ``Tensor.numpy``: aliases torch does not version (pytorch.unversioned),
  recorded only while the next backward is audited.

Nothing here changes what torch or Warp computes. torch older than ``TORCH_MIN`` lacks the global optimizer hooks:
the watch does not start there and the report says so in one line. A PyTorch release that renames any of this is
fixed in this file.
"""

from __future__ import annotations

import contextlib
import functools
import sys

from gradcheck.warp_compat.torch_interop import bridge

TORCH_MIN = (2, 1)
EXTRA = "pip install 'gradcheck[torch]'"


def unusable(torch) -> str | None:
    """Why torch auditing cannot run on this torch (one line for the report), or None."""
    version = str(getattr(torch, "__version__", "0"))
    try:
        numbers = tuple(int(part) for part in version.split("+")[0].split(".")[:2])
    except ValueError:
        numbers = (0, 0)
    optimizer = sys.modules.get("torch.optim.optimizer")
    if numbers < TORCH_MIN or optimizer is None or not hasattr(optimizer, "register_optimizer_step_post_hook"):
        need = ".".join(map(str, TORCH_MIN))
        return (
            f"torch {version}: auditing torch's backward and the torch<->Warp bridge needs torch >= {need} "
            f"({EXTRA}); the Warp side was audited"
        )
    return None


def data_ptr(tensor) -> int:
    try:
        return int(tensor.data_ptr())
    except Exception:  # noqa: BLE001 - a tensor without storage (meta, sparse): no address
        return 0


@contextlib.contextmanager
def observed(watch):
    """Install the hooks for ``watch`` (a pytorch.watch.TorchWatch); every one is removed on exit."""
    import torch
    import torch.optim.optimizer as optimizer_module

    undo: list = []

    def patch(owner, name: str, make) -> None:
        original = getattr(owner, name)
        setattr(owner, name, make(original))
        undo.append(lambda: setattr(owner, name, original))

    patch(torch.autograd, "backward", lambda original: _backward(watch, original))
    patch(torch.autograd, "grad", lambda original: _grad(watch, original))
    patch(torch.optim.Optimizer, "__init__", lambda original: _made(watch, original))
    patch(torch.optim.Optimizer, "zero_grad", lambda original: _zero_grad(watch, original))
    patch(torch.nn.Module, "zero_grad", lambda original: _zero_grad(watch, original))
    pre = optimizer_module.register_optimizer_step_pre_hook(lambda opt, args, kwargs: watch.before_step(opt))
    post = optimizer_module.register_optimizer_step_post_hook(lambda opt, args, kwargs: watch.after_step(opt))
    undo += [pre.remove, post.remove]
    ddp = _ddp(torch)
    if ddp is not None:
        patch(ddp, "__init__", lambda original: _ddp_made(watch, original))
        patch(ddp, "forward", lambda original: _ddp_forward(watch, original))
    for scaler in _scalers(torch):
        patch(scaler, "scale", lambda original: _scale(watch, original))
        patch(scaler, "step", lambda original: _scaler_step(watch, original))
    function = torch.autograd.Function
    applied = vars(function)["apply"]  # the classmethod itself: getattr would give a method bound to Function
    function.apply = classmethod(_applied(watch, applied.__func__))
    undo.append(lambda: setattr(function, "apply", applied))
    undo.append(_aliases(torch, watch.unversioned))
    watch.unversioned.rearm()
    watch.attach_bridge = lambda: bridge(watch, patch)  # the program imports Warp now or later
    if "warp" in sys.modules:
        watch.attach_bridge()
    try:
        yield watch
    finally:
        watch.attach_bridge = lambda: None
        for step in reversed(undo):
            step()


class _DataProperty(property):
    """``Tensor.data`` as a property, named as torch's own getset is (``__torch_function__`` code reads
    ``func.__self__.__name__`` of an attribute's ``__get__``)."""

    __name__ = "data"


def _aliases(torch, tracker):
    """``Tensor.data`` and ``Tensor.numpy`` as torch has them, telling ``tracker`` (pytorch.unversioned) of each alias
    taken while it is armed. Returns what undoes it."""
    getset = vars(torch._C.TensorBase)["data"]
    original_numpy = torch._C.TensorBase.numpy

    def data(self):
        alias = getset.__get__(self)
        if tracker.armed:
            tracker.taken(self, ".data")
        return alias

    def assign(self, value):
        assigned = tracker.assigning(self) if tracker.armed else None
        getset.__set__(self, value)
        if assigned is not None:
            assigned(self)

    @functools.wraps(original_numpy)
    def numpy(self, *args, **kwargs):
        array = original_numpy(self, *args, **kwargs)
        if tracker.armed:
            tracker.taken(self, ".numpy()")
        return array

    before = {name: vars(torch.Tensor).get(name) for name in ("data", "numpy")}
    torch.Tensor.data = _DataProperty(data, assign, doc=getset.__doc__)
    torch.Tensor.numpy = numpy

    def undo() -> None:
        for name, value in before.items():
            if value is None:
                delattr(torch.Tensor, name)
            else:
                setattr(torch.Tensor, name, value)

    return undo


def _backward(watch, original):
    import torch

    @functools.wraps(original)
    def backward(tensors, grad_tensors=None, *args, **kwargs):
        if not isinstance(tensors, (torch.Tensor, tuple, list)):
            tensors = tuple(tensors)  # a generator: torch accepts any iterable, and the watch reads it first
        if grad_tensors is not None and not isinstance(grad_tensors, (torch.Tensor, tuple, list)):
            grad_tensors = tuple(grad_tensors)
        if watch.busy:
            return original(tensors, grad_tensors, *args, **kwargs)
        return watch.on_backward(
            tensors, grad_tensors, kwargs, lambda: original(tensors, grad_tensors, *args, **kwargs)
        )

    return backward


def _grad(watch, original):
    """``torch.autograd.grad``: audited at the bridge (pytorch.grad_calls); its result is the program's, untouched."""

    @functools.wraps(original)
    def grad(outputs, inputs, grad_outputs=None, *args, **kwargs):
        if watch.busy:
            return original(outputs, inputs, grad_outputs, *args, **kwargs)
        return watch.grad_calls.on_grad(
            outputs, grad_outputs, lambda: original(outputs, inputs, grad_outputs, *args, **kwargs)
        )

    return grad


def _ddp(torch):
    """DistributedDataParallel, where this torch has torch.distributed (pytorch.ranks)."""
    distributed = getattr(torch, "distributed", None)
    if distributed is None or not distributed.is_available():
        return None
    import torch.nn.parallel

    return getattr(torch.nn.parallel, "DistributedDataParallel", None)


def _ddp_made(watch, original):
    """``DistributedDataParallel.__init__``: a DDP model is known from the start, even one the program then calls
    only through ``.module`` (outside DDP: nothing is all-reduced)."""

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        if not watch.busy:
            watch.on_ddp_forward(self, made=True)

    return __init__


def _ddp_forward(watch, original):
    """``DistributedDataParallel.forward``: which DDP models run, and whether this forward's backward all-reduces."""

    @functools.wraps(original)
    def forward(self, *args, **kwargs):
        if not watch.busy:
            watch.on_ddp_forward(self)
        return original(self, *args, **kwargs)

    return forward


def _scalers(torch) -> list:
    """GradScaler's classes (torch.amp's, and torch.cuda.amp's where it is not a subclass of it)."""
    found = []
    for owner in (getattr(torch, "amp", None), getattr(getattr(torch, "cuda", None), "amp", None)):
        cls = getattr(owner, "GradScaler", None)
        if cls is not None and hasattr(cls, "scale") and not any(issubclass(cls, f) for f in found):
            found.append(cls)
    return found


def _scale(watch, original):
    @functools.wraps(original)
    def scale(self, outputs):
        result = original(self, outputs)
        if getattr(result, "requires_grad", False) and not watch.busy:
            try:
                factor = float(self.get_scale()) if self.is_enabled() else 1.0
            except Exception:  # noqa: BLE001 - a scaler we cannot read: gradients are taken as they are
                factor = 1.0
            watch.on_scale(result, factor)
        return result

    return scale


def _scaler_step(watch, original):
    @functools.wraps(original)
    def step(self, *args, **kwargs):
        watch.scaler_step = True
        try:
            return original(self, *args, **kwargs)
        finally:
            watch.scaler_step = False

    return step


def _made(watch, original):
    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        watch.on_optimizer(self)

    return __init__


def _zero_grad(watch, original):
    @functools.wraps(original)
    def zero_grad(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        if not watch.busy:
            watch.on_zero_grad(self)
        return result

    return zero_grad


def _applied(watch, original):
    """``Function.apply`` as a classmethod's function: ``cls`` is the program's Function subclass."""

    @functools.wraps(original)
    def apply(cls, *args, **kwargs):
        if watch.busy:
            return original(cls, *args, **kwargs)
        return watch.on_function(cls, args, kwargs, lambda: original(cls, *args, **kwargs))

    return apply
