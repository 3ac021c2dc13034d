"""q12: Linear -> BatchNorm1d -> a Warp residual activation y = x + alpha * tanh(x) (alpha learned per feature)
-> Linear, trained with Adam in train mode (batch statistics), then one evaluation in eval mode (running stats).

Feature: torch.nn.BatchNorm1d. The Warp Function makes fresh arrays and a fresh tape per call and returns Warp's
adjoints. Correct; ``--check`` compares the gradients with the same model in pure torch.
"""

import sys

import torch
import warp as wp

wp.config.quiet = True
wp.init()


@wp.kernel
def res_tanh(x: wp.array2d(dtype=float), alpha: wp.array(dtype=float), y: wp.array2d(dtype=float)):
    i, j = wp.tid()
    v = x[i, j]
    y[i, j] = v + alpha[j] * wp.tanh(v)


class WarpResTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha):
        xw = wp.from_torch(x.detach().contiguous(), requires_grad=True)
        aw = wp.from_torch(alpha.detach().contiguous(), requires_grad=True)
        yw = wp.zeros(xw.shape, dtype=float, requires_grad=True, device=xw.device)
        tape = wp.Tape()
        with tape:
            wp.launch(res_tanh, dim=xw.shape, inputs=[xw, aw], outputs=[yw], device=xw.device)
        ctx.tape, ctx.xw, ctx.aw, ctx.yw = tape, xw, aw, yw
        return wp.to_torch(yw, requires_grad=False)

    @staticmethod
    def backward(ctx, grad_y):
        ctx.tape.backward(grads={ctx.yw: wp.from_torch(grad_y.contiguous())})
        return wp.to_torch(ctx.xw.grad), wp.to_torch(ctx.aw.grad)


class BNNet(torch.nn.Module):
    def __init__(self, use_warp=True):
        super().__init__()
        self.fc = torch.nn.Linear(8, 16, bias=False)  # BN removes any bias (its gradient would be 0)
        self.bn = torch.nn.BatchNorm1d(16)
        self.alpha = torch.nn.Parameter(torch.full((16,), 0.5))
        self.head = torch.nn.Linear(16, 1)
        self.use_warp = use_warp

    def forward(self, x):
        h = self.bn(self.fc(x))
        h = WarpResTanh.apply(h, self.alpha) if self.use_warp else h + self.alpha * torch.tanh(h)
        return self.head(h)


def check(model, x, y):
    ref = BNNet(use_warp=False)
    ref.load_state_dict(model.state_dict())
    worst = 0.0
    for _ in range(2):
        got = torch.autograd.grad(torch.nn.functional.mse_loss(model(x), y), list(model.parameters()))
        exp = torch.autograd.grad(torch.nn.functional.mse_loss(ref(x), y), list(ref.parameters()))
        for g, e in zip(got, exp):
            worst = max(worst, float((g - e).abs().max() / (e.abs().max() + 1e-12)))
    print(f"q12 check: max rel grad diff vs torch {worst:.2e}")
    assert worst < 1e-4, worst


def main():
    torch.manual_seed(12)
    model = BNNet()
    x = torch.randn(32, 8) * 3 + 1
    y = (x[:, :1] - x[:, 1:2]).sin()
    if "--check" in sys.argv[1:]:
        check(model, x, y)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(10):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        eval_loss = torch.nn.functional.mse_loss(model(x), y)
    print("q12 batchnorm loss", round(loss.item(), 5), "eval", round(eval_loss.item(), 5))
    return 0


if __name__ == "__main__":
    sys.exit(main())
