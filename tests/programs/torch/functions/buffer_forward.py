"""A Warp-backed Function whose forward also updates a running statistic in place (a module-level buffer, as batch
norm's running mean): not a function of its inputs alone. gradcheck must not judge it, and must leave the buffer as
the program left it (the program prints it)."""

import torch
from fkernels import sin_scale_adjoint, sin_scale_forward

torch.manual_seed(0)
RUNNING = torch.zeros(1)


class WarpSinTracked(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, a):
        RUNNING.mul_(0.9).add_(0.1 * x.detach().mean())
        return sin_scale_forward(ctx, x, a)

    @staticmethod
    def backward(ctx, g):
        return sin_scale_adjoint(ctx, g)


x = torch.nn.Parameter(torch.randn(16))
a = torch.nn.Parameter(torch.rand(16) + 0.5)
opt = torch.optim.SGD([x, a], lr=0.05)
for step in range(4):
    opt.zero_grad()
    loss = WarpSinTracked.apply(x, a).pow(2).mean()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.6f} running {RUNNING.item():.6f}")
