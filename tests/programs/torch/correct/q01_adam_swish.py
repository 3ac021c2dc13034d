"""q01: an MLP whose hidden activation is a Warp kernel (swish with a learned per-feature slope), trained with Adam.

Feature: torch.optim.Adam. The Warp layer is a torch.autograd.Function: forward records the launch on a fresh
wp.Tape with fresh arrays (inputs wrapped from detached tensors, so Warp's adjoints are its own buffers), backward
copies grad_output into the output's own adjoint through tape.backward(grads=...) and returns the input adjoints
with wp.to_torch. Correct; ``--check`` compares the parameter gradients with the same model in pure torch.
"""

import sys

import torch
import warp as wp

wp.config.quiet = True
wp.init()


@wp.kernel
def swish_kernel(x: wp.array2d(dtype=wp.float32), a: wp.array(dtype=wp.float32), y: wp.array2d(dtype=wp.float32)):
    i, j = wp.tid()
    v = x[i, j]
    y[i, j] = v / (1.0 + wp.exp(-a[j] * v))


class WarpSwish(torch.autograd.Function):
    """y = x * sigmoid(a * x), a per column."""

    @staticmethod
    def forward(ctx, x, a):
        xw = wp.from_torch(x.detach().contiguous(), requires_grad=True)
        aw = wp.from_torch(a.detach().contiguous(), requires_grad=True)
        yw = wp.zeros(x.shape, dtype=wp.float32, requires_grad=True, device=xw.device)
        tape = wp.Tape()
        with tape:
            wp.launch(swish_kernel, dim=x.shape, inputs=[xw, aw], outputs=[yw], device=xw.device)
        ctx.tape, ctx.xw, ctx.aw, ctx.yw = tape, xw, aw, yw
        return wp.to_torch(yw, requires_grad=False)

    @staticmethod
    def backward(ctx, grad_y):
        ctx.tape.backward(grads={ctx.yw: wp.from_torch(grad_y.contiguous())})
        return wp.to_torch(ctx.xw.grad), wp.to_torch(ctx.aw.grad)


class Net(torch.nn.Module):
    def __init__(self, use_warp=True):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 16)
        self.slope = torch.nn.Parameter(torch.linspace(0.5, 2.0, 16))
        self.fc2 = torch.nn.Linear(16, 1)
        self.use_warp = use_warp

    def forward(self, x):
        h = self.fc1(x)
        if self.use_warp:
            h = WarpSwish.apply(h, self.slope)
        else:
            h = h * torch.sigmoid(self.slope * h)
        return self.fc2(h)


def loss_fn(model, x, y):
    return torch.nn.functional.mse_loss(model(x), y)


def check(model, x, y):
    ref = Net(use_warp=False)
    ref.load_state_dict(model.state_dict())
    worst = 0.0
    for _ in range(2):
        got = torch.autograd.grad(loss_fn(model, x, y), list(model.parameters()))
        exp = torch.autograd.grad(loss_fn(ref, x, y), list(ref.parameters()))
        for g, e in zip(got, exp):
            worst = max(worst, float((g - e).abs().max() / (e.abs().max() + 1e-12)))
    print(f"q01 check: max rel grad diff vs torch {worst:.2e}")
    assert worst < 1e-4, worst
    return worst


def main():
    torch.manual_seed(0)
    x = torch.randn(32, 6)
    y = torch.sin(x.sum(1, keepdim=True))
    model = Net()
    if "--check" in sys.argv[1:]:
        check(model, x, y)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(10):
        opt.zero_grad()
        loss = loss_fn(model, x, y)
        loss.backward()
        opt.step()
    print("q01 adam loss", round(loss.item(), 5))
    return 0


if __name__ == "__main__":
    sys.exit(main())
