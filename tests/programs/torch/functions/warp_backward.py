"""A Warp-backed torch.autograd.Function y = sin(x) * a: its backward runs Warp, by the tape or by launching the
kernel's adjoint. --case tape | adjoint: correct; tape-scaled (the tape's gradient of x returned doubled),
adjoint-factor (the adjoint launched with the output gradient times 3): wrong; reversed (the tape's gradients
negated: gradient reversal, wrong on purpose). --check prints the largest relative
difference of the Function's gradients from torch's own of sin(x) * a."""

import argparse

import torch
import warp as wp
from fkernels import sin_scale_adjoint, sin_scale_forward, train

parser = argparse.ArgumentParser()
parser.add_argument("--case", default="tape", choices=["tape", "adjoint", "tape-scaled", "adjoint-factor", "reversed"])
parser.add_argument("--check", action="store_true")
args = parser.parse_args()


class WarpSinScale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, a):
        return sin_scale_forward(ctx, x, a)

    @staticmethod
    def backward(ctx, grad_y):
        if args.case.startswith("adjoint"):
            return sin_scale_adjoint(ctx, grad_y, 3.0 if args.case == "adjoint-factor" else 1.0)
        ctx.y.grad = wp.from_torch(grad_y.contiguous().clone())
        ctx.tape.backward()
        grad_x, grad_a = wp.to_torch(ctx.x.grad).clone(), wp.to_torch(ctx.a.grad).clone()
        if args.case == "reversed":
            return -grad_x, -grad_a
        return (2.0 * grad_x if args.case == "tape-scaled" else grad_x), grad_a


if args.check:
    x = torch.randn(16, requires_grad=True)
    a = torch.rand(16, requires_grad=True)
    w = torch.randn(16)
    mine = torch.autograd.grad((WarpSinScale.apply(x, a) * w).sum(), (x, a))
    truth = torch.autograd.grad((torch.sin(x) * a * w).sum(), (x, a))
    print("difference:", max(float((m - t).abs().max() / t.abs().max()) for m, t in zip(mine, truth)))
else:
    train(WarpSinScale)
