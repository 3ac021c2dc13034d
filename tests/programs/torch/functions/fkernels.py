"""The Warp kernels and Functions the custom-Function programs share (one Warp module: one compile)."""

import torch
import warp as wp

wp.config.quiet = True
wp.init()


@wp.kernel
def sin_scale(x: wp.array(dtype=wp.float32), a: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = wp.sin(x[i]) * a[i % a.shape[0]]


@wp.kernel
def masked(x: wp.array(dtype=wp.float32), mask: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = x[i] * mask[i] * 2.0


def sin_scale_forward(ctx, x, a):
    """y = sin(x) * a, on a tape; the arrays kept on ctx for the backward."""
    ctx.x = wp.from_torch(x.detach().contiguous(), requires_grad=True)
    ctx.a = wp.from_torch(a.detach().contiguous(), requires_grad=True)
    ctx.y = wp.zeros(x.shape[0], dtype=wp.float32, requires_grad=True, device=ctx.x.device)
    ctx.tape = wp.Tape()
    with ctx.tape:
        wp.launch(sin_scale, dim=x.shape[0], inputs=[ctx.x, ctx.a], outputs=[ctx.y], device=ctx.x.device)
    return wp.to_torch(ctx.y, requires_grad=False).clone()


def sin_scale_adjoint(ctx, grad_y, factor=1.0):
    """The kernel's adjoint launched by hand: gradients of x and a for the output gradient ``grad_y * factor``."""
    adj_y = wp.from_torch((grad_y * factor).contiguous())
    adj_x = wp.zeros_like(ctx.x, requires_grad=False)
    adj_a = wp.zeros_like(ctx.a, requires_grad=False)
    wp.launch(
        sin_scale,
        dim=ctx.x.shape[0],
        inputs=[ctx.x, ctx.a],
        outputs=[ctx.y],
        adj_inputs=[adj_x, adj_a],
        adj_outputs=[adj_y],
        adjoint=True,
        device=ctx.x.device,
    )
    return wp.to_torch(adj_x).clone(), wp.to_torch(adj_a).clone()


def train(function, steps=4, n=16, seed=0):
    """A few SGD steps through ``function`` (x and a learned); prints the losses the program reaches."""
    torch.manual_seed(seed)
    x = torch.nn.Parameter(torch.randn(n))
    a = torch.nn.Parameter(torch.rand(4) + 0.5)
    opt = torch.optim.SGD([x, a], lr=0.05)
    for step in range(steps):
        opt.zero_grad()
        loss = (function.apply(x, a.repeat(n // 4)) ** 2).mean()
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item():.6f}")
    return x, a
