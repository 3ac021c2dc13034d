"""A tensor torch saved for its backward, overwritten by Warp before that backward ran (issue 43).

``WarpSquare`` computes ``y = x * x`` with a Warp kernel into an output array the Function allocates once and reuses,
and returns ``wp.to_torch(out)``: a tensor that *is* that Warp memory. The model calls it twice per step, so the
second call writes the memory the first call returned, which ``h1 * w1`` saved for its backward (the gradient of
``w1`` is ``h1``). torch's version counter cannot see Warp's writes: the gradient of ``w1`` is silently computed
from the second call's values.

``--case``:
- ``overwritten``: the mistake described above;
- ``cloned``: ``wp.to_torch(out).clone()``: each call's output is torch's own memory (correct);
- ``identical``: both calls square the same input, so the overwrite writes identical values (correct);
- ``recomputed``: the Function returns a copy, but saves its output buffer itself (``ctx.save_for_backward(x,
  wp.to_torch(out))``), the second call overwrites it, and its backward recomputes the buffer from the input it
  saved before reading it (correct, on purpose);
- ``saved-not-recomputed``: the same without the recompute: its backward reads the second call's values.
``--check`` prints the largest relative difference between the program's gradients and torch's own.
"""

import argparse
import sys

import torch
import warp as wp


@wp.kernel
def square(x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel
def square_adjoint(x: wp.array(dtype=wp.float32), g: wp.array(dtype=wp.float32), out: wp.array(dtype=wp.float32)):
    i = wp.tid()
    out[i] = 2.0 * x[i] * g[i]


CASES = ("overwritten", "cloned", "identical", "recomputed", "saved-not-recomputed")


class WarpSquare(torch.autograd.Function):
    case = "overwritten"
    buffer = None  # the output array, allocated once

    @staticmethod
    def forward(ctx, x):
        n = x.shape[0]
        if WarpSquare.buffer is None or WarpSquare.case == "cloned":
            WarpSquare.buffer = wp.zeros(n, dtype=wp.float32)
        x_wp = wp.from_torch(x.detach().contiguous())
        wp.launch(square, dim=n, inputs=[x_wp], outputs=[WarpSquare.buffer])
        y = wp.to_torch(WarpSquare.buffer)
        if WarpSquare.case in ("recomputed", "saved-not-recomputed"):
            ctx.out = WarpSquare.buffer
            ctx.save_for_backward(x, y)  # the buffer itself: recomputed in backward before it is read
            return y.clone()
        ctx.save_for_backward(x)
        return y.clone() if WarpSquare.case == "cloned" else y

    @staticmethod
    def backward(ctx, grad_y):
        if WarpSquare.case == "recomputed":
            x = ctx.saved_tensors[0]
            wp.launch(square, dim=x.shape[0], inputs=[wp.from_torch(x.detach())], outputs=[ctx.out])  # its own again
        (x, *saved_y) = ctx.saved_tensors
        if saved_y:  # the adjoint from the saved output: 2 * sqrt(y) * g (x > 0 here), as a Function may compute it
            x = saved_y[0].sqrt()
        x_wp = wp.from_torch(x.detach().contiguous())
        out = wp.zeros(x.shape[0], dtype=wp.float32)
        g = wp.from_torch(grad_y.detach().contiguous().clone())
        wp.launch(square_adjoint, dim=x.shape[0], inputs=[x_wp, g], outputs=[out])
        return wp.to_torch(out)


def loss_of(x1, x2, w1, w2, square):
    h1 = square(x1)
    h2 = square(x2)
    return (h1 * w1).sum() + (h2 * w2).sum()  # h1 * w1 saves h1: the gradient of w1 is h1


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", choices=CASES, default="overwritten")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    wp.config.quiet = True
    wp.init()
    WarpSquare.case = args.case
    torch.manual_seed(0)
    w1 = torch.nn.Parameter(torch.rand(6))
    w2 = torch.nn.Parameter(torch.rand(6))
    optimizer = torch.optim.SGD([w1, w2], lr=0.05)
    worst = 0.0
    for step in range(args.steps):
        x1 = (torch.linspace(0.5, 1.5, 6) + 0.1 * step).requires_grad_()  # an input torch differentiates too
        x2 = x1 if args.case == "identical" else (torch.linspace(1.0, 2.0, 6) * 1.7).requires_grad_()
        optimizer.zero_grad()
        loss = loss_of(x1, x2, w1, w2, WarpSquare.apply)
        loss.backward()
        if args.check:
            expected = torch.autograd.grad(loss_of(x1, x2, w1, w2, lambda x: x * x), (w1, x1))
            for mine, theirs in zip((w1.grad, x1.grad), expected):
                worst = max(worst, float((mine - theirs).abs().max() / theirs.abs().max()))
        optimizer.step()
    if args.check:
        print(f"max relative gradient difference: {worst:.3g}")
    print(f"loss {float(loss.detach()):.5f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
