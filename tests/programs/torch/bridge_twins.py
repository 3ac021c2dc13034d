"""Correct ways across the torch<->Warp bridge that look like the mistakes (the clean twins of
gradcheck.examples.torch_warp_train's faults), and one mistake that is harmless in this graph.

``--case``:
- ``alias-write``: ``wp.from_torch(w)`` wraps ``w.grad``, Warp writes the gradient through it, backward returns None
  for ``w`` (not the alias): correct, once;
- ``cached-keep-grad``: the wrapper is made once, and the loop zeroes with ``zero_grad(set_to_none=False)``, so
  ``w.grad`` stays the buffer the wrapper aliases: correct;
- ``reused-zeroed``: the tape and arrays are made once and reused, and backward calls ``tape.zero()`` first: correct;
- ``grad-output-private``: backward hands torch's ``grad_output`` to Warp, which zeroes it, but no other node
  reads that tensor in this graph: correct gradients (a warning: fragile);
- ``doubled``: the mistake, for comparison: the alias is returned as well.
``--check`` prints the largest relative difference between the loop's gradients of ``w`` and torch's own.
"""

import argparse
import sys

import torch
import warp as wp


@wp.kernel
def square_scale(x: wp.array(dtype=wp.float32), w: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = w[i] * x[i] * x[i]


class Square(torch.autograd.Function):
    case = "alias-write"
    reused = None
    cached = None

    @staticmethod
    def forward(ctx, x, w):
        case = Square.case
        ctx.x = wp.from_torch(x.detach(), requires_grad=False)
        if case == "cached-keep-grad":
            Square.cached = Square.cached or wp.from_torch(w)
            ctx.w = Square.cached
        elif case in ("alias-write", "doubled"):
            ctx.w = wp.from_torch(w)
        else:
            ctx.w = wp.from_torch(w.detach(), requires_grad=False)
            ctx.w.requires_grad = True
        if case == "reused-zeroed":
            if Square.reused is None:
                y = wp.zeros(x.shape[0], dtype=wp.float32, requires_grad=True)
                w_own = wp.zeros(x.shape[0], dtype=wp.float32, requires_grad=True)
                Square.reused = (wp.Tape(), y, w_own)
            tape, ctx.y, w_own = Square.reused
            wp.copy(w_own, ctx.w)
            ctx.w = w_own
        else:
            tape, ctx.y = wp.Tape(), wp.zeros(x.shape[0], dtype=wp.float32, requires_grad=True)
        tape.reset() if case == "reused-zeroed" else None
        with tape:
            wp.launch(square_scale, dim=x.shape[0], inputs=[ctx.x, ctx.w], outputs=[ctx.y])
        ctx.tape = tape
        return wp.to_torch(ctx.y, requires_grad=False).clone()

    @staticmethod
    def backward(ctx, grad_y):
        case = Square.case
        if case == "reused-zeroed":
            ctx.tape.zero()
        ctx.y.grad = wp.from_torch(grad_y if case == "grad-output-private" else grad_y.clone())
        ctx.tape.backward()
        if case in ("alias-write", "cached-keep-grad"):
            return None, None
        return None, wp.to_torch(ctx.w.grad).clone() if case == "reused-zeroed" else wp.to_torch(ctx.w.grad)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", default="alias-write")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    wp.config.quiet = True
    wp.init()
    Square.case = args.case
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.rand(8) + 0.5)
    reference = w.detach().clone().requires_grad_(True)
    optimizer = torch.optim.SGD([w], lr=0.01)
    worst = 0.0
    for step in range(args.steps):
        x = torch.linspace(-1.0, 1.0, 8) * (1 + step)
        loss = (Square.apply(x, w) * torch.linspace(0.5, 1.5, 8)).sum()
        loss.backward()
        ref_loss = (reference * x * x * torch.linspace(0.5, 1.5, 8)).sum()
        (ref_grad,) = torch.autograd.grad(ref_loss, reference)
        worst = max(worst, float((w.grad - ref_grad).abs().max() / ref_grad.abs().max()))
        optimizer.step()
        with torch.no_grad():
            reference.copy_(w)
        optimizer.zero_grad(set_to_none=args.case != "cached-keep-grad")
    if args.check:
        print(f"max relative gradient difference vs torch: {worst:.3g}")
    print(f"loss {float(loss.detach()):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
