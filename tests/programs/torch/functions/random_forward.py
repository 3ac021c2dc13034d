"""A Warp-backed dropout: the forward draws its mask from torch's generator, a Warp kernel applies it, and the
backward launches the kernel's adjoint. Not a function of its inputs: gradcheck must not judge it, and the program's
numbers (its losses, and the random numbers it draws after) must be exactly those of plain python."""

import torch
import warp as wp
from fkernels import masked

torch.manual_seed(0)


class WarpDropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        mask = (torch.rand(x.shape) > 0.5).float()
        ctx.x = wp.from_torch(x.detach().contiguous())
        ctx.mask = wp.from_torch(mask)
        ctx.y = wp.zeros_like(ctx.x)
        wp.launch(masked, dim=x.shape[0], inputs=[ctx.x, ctx.mask], outputs=[ctx.y])
        return wp.to_torch(ctx.y).clone()

    @staticmethod
    def backward(ctx, g):
        adj_x = wp.zeros_like(ctx.x)
        wp.launch(
            masked,
            dim=ctx.x.shape[0],
            inputs=[ctx.x, ctx.mask],
            outputs=[ctx.y],
            adj_inputs=[adj_x, None],
            adj_outputs=[wp.from_torch(g.contiguous())],
            adjoint=True,
        )
        return wp.to_torch(adj_x).clone()


w = torch.nn.Parameter(torch.randn(64))
opt = torch.optim.SGD([w], lr=0.1)
for step in range(4):
    opt.zero_grad()
    loss = WarpDropout.apply(w).pow(2).mean()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.6f} next {torch.rand(1).item():.6f}")
