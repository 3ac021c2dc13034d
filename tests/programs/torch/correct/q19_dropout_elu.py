"""q19: Linear -> Warp ELU with a learned per-feature alpha (a branch in the kernel) -> Dropout(0.25) in train mode
-> Linear, trained with Adam.

Feature: dropout in train mode (a fresh random mask every step, after the Warp layer, so the Warp output's
gradient has zeros where units were dropped). The Warp Function makes fresh arrays and a fresh tape per call.
Correct; ``--check`` reseeds torch before each forward so the Warp model and its pure-torch twin draw the same mask.
"""

import sys

import torch
import warp as wp

wp.config.quiet = True
wp.init()


@wp.kernel
def elu(x: wp.array2d(dtype=float), alpha: wp.array(dtype=float), y: wp.array2d(dtype=float)):
    i, j = wp.tid()
    v = x[i, j]
    if v > 0.0:
        y[i, j] = v
    else:
        y[i, j] = alpha[j] * (wp.exp(v) - 1.0)


class WarpELU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha):
        xw = wp.from_torch(x.detach().contiguous(), requires_grad=True)
        aw = wp.from_torch(alpha.detach().contiguous(), requires_grad=True)
        yw = wp.zeros(xw.shape, dtype=float, requires_grad=True, device=xw.device)
        tape = wp.Tape()
        with tape:
            wp.launch(elu, dim=xw.shape, inputs=[xw, aw], outputs=[yw], device=xw.device)
        ctx.tape, ctx.xw, ctx.aw, ctx.yw = tape, xw, aw, yw
        return wp.to_torch(yw, requires_grad=False)

    @staticmethod
    def backward(ctx, grad_y):
        ctx.tape.backward(grads={ctx.yw: wp.from_torch(grad_y.contiguous())})
        return wp.to_torch(ctx.xw.grad), wp.to_torch(ctx.aw.grad)


def torch_elu(x, alpha):
    return torch.where(x > 0, x, alpha * (torch.exp(x) - 1.0))


class DropNet(torch.nn.Module):
    def __init__(self, act=WarpELU.apply):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 24)
        self.alpha = torch.nn.Parameter(torch.ones(24))
        self.drop = torch.nn.Dropout(0.25)
        self.fc2 = torch.nn.Linear(24, 1)
        self.act = act

    def forward(self, x):
        return self.fc2(self.drop(self.act(self.fc1(x), self.alpha)))


def check(model, x, y):
    ref = DropNet(act=torch_elu)
    ref.load_state_dict(model.state_dict())
    worst = 0.0
    for seed in (100, 101):
        torch.manual_seed(seed)
        got = torch.autograd.grad(torch.nn.functional.mse_loss(model(x), y), list(model.parameters()))
        torch.manual_seed(seed)
        exp = torch.autograd.grad(torch.nn.functional.mse_loss(ref(x), y), list(ref.parameters()))
        for g, e in zip(got, exp):
            worst = max(worst, float((g - e).abs().max() / (e.abs().max() + 1e-12)))
    print(f"q19 check: max rel grad diff vs torch {worst:.2e}")
    assert worst < 1e-4, worst


def main():
    torch.manual_seed(19)
    model = DropNet()
    x = torch.randn(32, 6)
    y = x[:, :3].sum(1, keepdim=True).relu()
    if "--check" in sys.argv[1:]:
        check(model, x, y)
        torch.manual_seed(19)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(10):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    print("q19 dropout loss", round(loss.item(), 5))
    return 0


if __name__ == "__main__":
    sys.exit(main())
