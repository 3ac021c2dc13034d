"""A tensor torch saved for a backward, written through an alias torch does not version, between the forward and
the backward (issue 43): the gradient is silently computed from the written values.

A critic in the WGAN style: ``h = WarpTanh(lin1(x))`` (a Warp kernel, its adjoint by a Warp tape), ``y = lin2(h *
scale).mean(1)``. ``lin2`` saves its weight and ``h * scale`` saves ``scale`` (each is what the gradient of the other
operand is made of). The wrong cases write one of them after the loss is computed and before ``backward``:

- ``clip``: WGAN's weight clipping, ``p.data.clamp_(-c, c)`` over lin2's parameters;
- ``numpy``: a projection of ``scale`` in NumPy through ``scale.detach().numpy()``;
- ``assign``: ``scale.data = scale.data / scale.data.norm()``;
- ``warp``: the same normalisation by a Warp kernel writing ``wp.from_torch(scale.detach())``.

Their correct twins: ``clip-after`` (the clipping after the step, as WGAN does it), ``read`` (the same aliases taken
only to log a norm), ``identical`` (a clamp whose bounds leave every value as it was), ``warp-copy`` (the kernel
writes a copy), ``before`` (the normalisation before the forward: torch differentiates what it computed).

``--check`` prints the largest relative difference between each gradient and pure torch's (torch.tanh), computed
from the values the forward used.
"""

import argparse
import sys

import numpy as np
import torch
import warp as wp

CASES = ("clip", "numpy", "assign", "warp", "clip-after", "read", "identical", "warp-copy", "before")


@wp.kernel
def tanh_kernel(x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = wp.tanh(x[i])


@wp.kernel
def normalise(v: wp.array(dtype=wp.float32), norm: float):
    i = wp.tid()
    v[i] = v[i] / norm


class WarpTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        flat = x.detach().reshape(-1).contiguous()
        ctx.x = wp.from_torch(flat, requires_grad=True)
        ctx.y = wp.zeros(flat.shape[0], dtype=wp.float32, requires_grad=True)
        ctx.tape = wp.Tape()
        with ctx.tape:
            wp.launch(tanh_kernel, dim=flat.shape[0], inputs=[ctx.x], outputs=[ctx.y])
        ctx.shape = x.shape
        return wp.to_torch(ctx.y).clone().reshape(x.shape)

    @staticmethod
    def backward(ctx, grad):
        ctx.y.grad = wp.from_torch(grad.reshape(-1).contiguous().clone())
        ctx.tape.backward()
        result = wp.to_torch(ctx.x.grad).clone().reshape(ctx.shape)
        ctx.tape.zero()
        return result


def critic(x, lin1, lin2, scale, activation):
    return lin2(activation(lin1(x)) * scale).mean(1)


def write(case: str, lin2, scale) -> None:
    """What the program does between computing the loss and calling backward."""
    if case == "clip":
        for p in lin2.parameters():
            p.data.clamp_(-0.05, 0.05)
    elif case == "identical":
        for p in lin2.parameters():
            p.data.clamp_(-1e3, 1e3)
    elif case == "numpy":
        values = scale.detach().numpy()
        values /= np.linalg.norm(values)
    elif case == "assign":
        scale.data = scale.data / scale.data.norm()
    elif case in ("warp", "warp-copy"):
        target = scale.detach() if case == "warp" else scale.detach().clone()
        norm = float(scale.detach().norm())
        wp.launch(normalise, dim=target.shape[0], inputs=[wp.from_torch(target), norm])
    elif case == "read":
        print(f"lin2 weight norm {float(lin2.weight.data.norm()):.4f}, scale max {scale.detach().numpy().max():.4f}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", choices=CASES, default="clip")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    wp.config.quiet = True
    wp.init()
    torch.manual_seed(0)
    lin1, lin2 = torch.nn.Linear(4, 8), torch.nn.Linear(8, 3)  # lin2 saves weight.t(): other order, same bytes
    scale = torch.nn.Parameter(torch.rand(8) + 0.5)
    params = [*lin1.parameters(), *lin2.parameters(), scale]
    optimizer = torch.optim.RMSprop(params, lr=5e-3)
    worst = 0.0
    for _step in range(4):
        x, target = torch.randn(16, 4), torch.randn(16)
        optimizer.zero_grad()
        if args.case == "before":
            scale.data = scale.data / scale.data.norm()
        used = [p.detach().clone() for p in params]  # the values the forward reads
        loss = ((critic(x, lin1, lin2, scale, WarpTanh.apply) - target) ** 2).mean()
        write(args.case, lin2, scale)
        loss.backward()
        if args.check:
            worst = max(worst, _difference(params, used, x, target))
        optimizer.step()
        if args.case == "clip-after":
            for p in lin2.parameters():
                p.data.clamp_(-0.05, 0.05)
    if args.check:
        print(f"max relative gradient difference: {worst:.3g}")
    print(f"loss {float(loss.detach()):.5f}")
    return 0


def _difference(params, used, x, target) -> float:
    """The largest relative difference between each .grad and pure torch's gradient at the values the forward
    used."""
    copies = [u.clone().requires_grad_(True) for u in used]
    w1, b1, w2, b2, scale = copies
    y = ((torch.tanh(x @ w1.T + b1) * scale) @ w2.T + b2).mean(1)
    expected = torch.autograd.grad(((y - target) ** 2).mean(), copies)
    return max(float((p.grad - e).abs().max() / e.abs().max()) for p, e in zip(params, expected))


if __name__ == "__main__":
    sys.exit(main())
