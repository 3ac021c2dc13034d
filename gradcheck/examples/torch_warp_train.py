"""A small PyTorch model trained through a Warp kernel: the torch<->Warp bridge, right and wrong.

    python -m gradcheck.examples.torch_warp_train                       # trains, prints the loss
    gradcheck exec -m gradcheck.examples.torch_warp_train --fault doubled-gradient

A two-layer model: an ``nn.Linear`` encoder, then a Warp kernel (``y = tanh(scale * h)`` elementwise, ``scale`` a
learned torch parameter) wrapped in a ``torch.autograd.Function`` the way Warp's interoperability guide does it
(``wp.from_torch`` in, a ``wp.Tape`` around the launch, ``tape.backward`` and ``wp.to_torch`` out), plus a skip path
and a linear head. ``--check`` compares the gradients of one step with the same model written in pure torch and
prints the largest relative difference: 0 on the clean program, not 0 on a fault that corrupts gradients.

Faults (each a mistake users report; ``--fault NAME``):
- ``doubled-gradient``: backward returns ``wp.to_torch(scale_wp.grad)``, which already *is* ``scale.grad``
  (``wp.from_torch`` aliased it): torch adds the returned tensor into the same memory, the gradient doubles;
- ``orphaned-alias``: the Warp array of ``scale`` is made once, outside the loop, and backward returns no gradient
  for it (Warp writes it straight into the aliased ``scale.grad``); ``optimizer.zero_grad()`` (set_to_none) replaces
  ``scale.grad`` after the first step, so Warp writes into memory torch no longer reads: ``scale`` stops learning;
- ``grad-output-zeroed``: backward hands torch's ``grad_output`` to Warp as the output's adjoint; Warp's backward
  zeroes it after reading, and the skip path, which got the same tensor from the sum, sees zeros;
- ``tape-reused``: the Warp arrays and the tape are made once (recorded at the first call) and reused every step,
  as performance-minded code does, but nothing calls ``tape.zero()``: each backward adds to the last one's adjoints;
- ``detached-input``: ``wp.from_torch(scale.detach())``: Warp gets no gradient array, ``scale.grad`` stays None;
- ``no-zero-grad``: the loop never calls ``optimizer.zero_grad()``: every step adds to the last step's gradient;
- ``missed-boundary``: accumulates over 2 micro-steps on purpose but zeroes only every 4th step;
- ``read-after-step``: logs the gradient norm after an optimizer that rescales ``.grad`` in place in its step.
``--accumulate K`` (clean) accumulates over K micro-steps and zeroes at each boundary, on purpose.
"""

from __future__ import annotations

import argparse
import contextlib
import sys

import torch
import warp as wp

FAULTS = (
    "doubled-gradient",
    "orphaned-alias",
    "grad-output-zeroed",
    "tape-reused",
    "detached-input",
    "no-zero-grad",
    "missed-boundary",
    "read-after-step",
)


@wp.kernel
def scaled_tanh(h: wp.array2d(dtype=wp.float32), scale: wp.array(dtype=wp.float32), y: wp.array2d(dtype=wp.float32)):
    i, j = wp.tid()
    y[i, j] = wp.tanh(scale[j] * h[i, j])


class WarpScaledTanh(torch.autograd.Function):
    """y = tanh(scale * h), the kernel above, differentiated by Warp's tape."""

    fault: str | None = None
    cached_scale: wp.array | None = None  # orphaned-alias: the wrapper made once
    reused: tuple | None = None  # tape-reused: (tape, h, scale, y) made once

    @staticmethod
    def forward_reused(ctx, h, scale):
        """Arrays and tape made at the first call, which records the launch; later calls copy the new values in
        and run the kernel again off the tape (the recorded launch reads the same arrays)."""
        first = WarpScaledTanh.reused is None
        if first:
            arrays = [wp.zeros(t.shape, dtype=wp.float32, requires_grad=True) for t in (h, scale, h)]
            WarpScaledTanh.reused = (wp.Tape(), *arrays)
        tape, ctx.h, ctx.scale, ctx.y = WarpScaledTanh.reused
        wp.copy(ctx.h, wp.from_torch(h.detach().contiguous(), requires_grad=False))
        wp.copy(ctx.scale, wp.from_torch(scale.detach(), requires_grad=False))
        with tape if first else contextlib.nullcontext():  # recorded once, then run again off the tape
            wp.launch(scaled_tanh, dim=ctx.h.shape, inputs=[ctx.h, ctx.scale], outputs=[ctx.y])
        ctx.tape = tape
        return wp.to_torch(ctx.y, requires_grad=False).clone()

    @staticmethod
    def forward(ctx, h, scale):
        fault = WarpScaledTanh.fault
        if fault == "tape-reused":
            return WarpScaledTanh.forward_reused(ctx, h, scale)
        ctx.h = wp.from_torch(h.detach().contiguous(), requires_grad=False)
        ctx.h.requires_grad = True  # h is not a leaf: Warp gets an adjoint of its own, returned from backward
        if fault == "detached-input":
            ctx.scale = wp.from_torch(scale.detach())
        elif fault == "doubled-gradient":
            ctx.scale = wp.from_torch(scale)  # requires_grad follows scale: its .grad aliases scale.grad
        elif fault == "orphaned-alias":
            if WarpScaledTanh.cached_scale is None:
                WarpScaledTanh.cached_scale = wp.from_torch(scale)
            ctx.scale = WarpScaledTanh.cached_scale
        else:
            ctx.scale = wp.from_torch(scale, requires_grad=False)
            ctx.scale.requires_grad = True  # a gradient buffer of Warp's own, not scale.grad
        ctx.y = wp.empty(ctx.h.shape, dtype=wp.float32, requires_grad=True, device=ctx.h.device)
        ctx.tape = wp.Tape()
        with ctx.tape:
            wp.launch(scaled_tanh, dim=ctx.h.shape, inputs=[ctx.h, ctx.scale], outputs=[ctx.y], device=ctx.h.device)
        return wp.to_torch(ctx.y, requires_grad=False)

    @staticmethod
    def backward(ctx, grad_y):
        fault = WarpScaledTanh.fault
        if fault == "grad-output-zeroed":
            ctx.y.grad = wp.from_torch(grad_y)  # Warp zeroes it after reading: torch's own tensor
        else:
            ctx.y.grad = wp.from_torch(grad_y.clone())
        ctx.tape.backward()
        grad_h = wp.to_torch(ctx.h.grad)
        if fault == "tape-reused":  # copies: the arrays are reused by the next step
            return grad_h.clone(), wp.to_torch(ctx.scale.grad).clone()
        if fault == "orphaned-alias":
            return grad_h, None  # Warp wrote scale's gradient into the alias of scale.grad
        grad_scale = wp.to_torch(ctx.scale.grad) if ctx.scale.requires_grad else None
        return grad_h, grad_scale


class Model(torch.nn.Module):
    def __init__(self, n_in: int = 8, width: int = 16, n_out: int = 2, warp: bool = True):
        super().__init__()
        self.encoder = torch.nn.Linear(n_in, width)
        self.scale = torch.nn.Parameter(torch.linspace(0.5, 1.5, width))
        self.head = torch.nn.Linear(width, n_out)
        self.warp = warp

    def forward(self, x):
        h = self.encoder(x)
        if self.warp:
            y = WarpScaledTanh.apply(h, self.scale)
        else:
            y = torch.tanh(self.scale * h)  # the pure-torch reference
        return self.head(y + h)  # the skip path gets the same gradient tensor as the Warp layer


class RescalingSGD(torch.optim.SGD):
    """SGD that leaves ``lr * grad`` in ``.grad`` after its step (as optimizers that keep state in the gradient
    buffer do): correct updates, but a norm read afterwards is not the gradient's."""

    @torch.no_grad()
    def step(self, closure=None):
        loss = super().step(closure)
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.grad.mul_(group["lr"])
        return loss


def data(seed: int = 0, batch: int = 32):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, 8, generator=g)
    target = torch.stack([x[:, :4].sum(1).sin(), x[:, 4:].sum(1).cos()], dim=1)
    return x, target


def gradients(model: Model) -> dict:
    x, target = data()
    model.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(model(x), target)
    loss.backward()
    return {
        name: (p.grad.clone() if p.grad is not None else torch.zeros_like(p)) for name, p in model.named_parameters()
    }


def check(fault: str | None) -> float:
    """The largest relative difference between one step's gradients through Warp and in pure torch."""
    torch.manual_seed(0)
    reference = Model(warp=False)
    torch.manual_seed(0)
    model = Model()
    WarpScaledTanh.fault, WarpScaledTanh.cached_scale, WarpScaledTanh.reused = fault, None, None
    expected = gradients(reference)
    got = gradients(model)
    if fault in ("orphaned-alias", "tape-reused"):  # the second step is where it goes wrong
        got = gradients(model)
    worst = 0.0
    for name, g in expected.items():
        scale = float(g.abs().max()) or 1.0
        worst = max(worst, float((got[name] - g).abs().max()) / scale)
    return worst


def train(fault: str | None, steps: int, accumulate: int) -> float:
    torch.manual_seed(0)
    model = Model()
    WarpScaledTanh.fault, WarpScaledTanh.cached_scale, WarpScaledTanh.reused = fault, None, None
    optimizer_type = RescalingSGD if fault == "read-after-step" else torch.optim.SGD
    optimizer = optimizer_type(model.parameters(), lr=0.05)
    if fault == "missed-boundary":
        accumulate = 2
    loss = torch.zeros(())
    for step in range(steps):
        x, target = data(seed=step % 4)
        loss = torch.nn.functional.mse_loss(model(x), target) / accumulate
        loss.backward()
        if (step + 1) % accumulate:
            continue  # accumulate over micro-steps
        optimizer.step()
        if fault == "read-after-step":
            norm = sum(float(p.grad.norm()) ** 2 for p in model.parameters()) ** 0.5
            print(f"step {step}: grad norm {norm:.4f}")
        if fault == "no-zero-grad" or (fault == "missed-boundary" and (step + 1) % 4):
            continue
        optimizer.zero_grad()
    return float(loss.detach()) * accumulate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fault", choices=FAULTS, default=None)
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--accumulate", type=int, default=1, help="micro-steps per optimizer step (clean: on purpose)")
    parser.add_argument("--check", action="store_true", help="compare one step's gradients with pure torch")
    args = parser.parse_args(argv)
    wp.config.quiet = True
    wp.init()
    if args.check:
        print(f"max relative gradient difference vs pure torch: {check(args.fault):.3g}")
        return 0
    print(f"final loss {train(args.fault, args.steps, args.accumulate):.5f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
