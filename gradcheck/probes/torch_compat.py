"""Where gradcheck meets a running PyTorch program: backward, the optimizers, zero_grad, and the torch<->Warp bridge.

The torch side of the observer (gradcheck.observe.torch_watch) sees a program only through the hooks installed
here, as the Warp side sees Warp through gradcheck.probes.warp_compat.hooks:

- ``torch.autograd.backward`` (``Tensor.backward`` calls it): the watch is called *around* it (``run`` to call);
- every optimizer's ``step`` (torch's global step pre/post hooks) and ``zero_grad``, and ``Module.zero_grad``;
- optimizers as they are made (``Optimizer.__init__``): which tensors a program trains;
- ``wp.from_torch`` and ``wp.to_torch`` (patched by probes.warp_compat.torch_interop): which torch tensor and
  Warp array share memory, and where.

Nothing here changes what torch or Warp computes. torch older than ``TORCH_MIN`` lacks the global optimizer hooks:
the watch does not start there and the report says so in one line. A PyTorch release that renames any of this is
fixed in this file.
"""

from __future__ import annotations

import contextlib
import functools
import sys

from gradcheck.probes.warp_compat.torch_interop import bridge

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
    """Install the hooks for ``watch`` (an observe.torch_watch.TorchWatch); every one is removed on exit."""
    import torch
    import torch.optim.optimizer as optimizer_module

    undo: list = []

    def patch(owner, name: str, make) -> None:
        original = getattr(owner, name)
        setattr(owner, name, make(original))
        undo.append(lambda: setattr(owner, name, original))

    patch(torch.autograd, "backward", lambda original: _backward(watch, original))
    patch(torch.optim.Optimizer, "__init__", lambda original: _made(watch, original))
    patch(torch.optim.Optimizer, "zero_grad", lambda original: _zero_grad(watch, original))
    patch(torch.nn.Module, "zero_grad", lambda original: _zero_grad(watch, original))
    pre = optimizer_module.register_optimizer_step_pre_hook(lambda opt, args, kwargs: watch.before_step(opt))
    post = optimizer_module.register_optimizer_step_post_hook(lambda opt, args, kwargs: watch.after_step(opt))
    undo += [pre.remove, post.remove]
    watch.attach_bridge = lambda: bridge(watch, patch)  # the program imports Warp now or later
    if "warp" in sys.modules:
        watch.attach_bridge()
    try:
        yield watch
    finally:
        watch.attach_bridge = lambda: None
        for step in reversed(undo):
            step()


def _backward(watch, original):
    @functools.wraps(original)
    def backward(tensors, grad_tensors=None, *args, **kwargs):
        if watch.busy:
            return original(tensors, grad_tensors, *args, **kwargs)
        return watch.on_backward(
            tensors, grad_tensors, kwargs, lambda: original(tensors, grad_tensors, *args, **kwargs)
        )

    return backward


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
