"""q05: a learned per-feature polynomial activation evaluated by a Warp kernel (Horner's rule in a loop of constant
trip count, unrolled by Warp), configured by a dataclass, trained with Adagrad.

Feature: torch.optim.Adagrad. The Warp Function makes fresh arrays and a fresh tape per call and returns Warp's
adjoints of the input and of the (features, 5) coefficient table. Correct; ``--check`` compares with Horner's rule
in torch.
"""

import dataclasses
import sys

import torch
import warp as wp

wp.config.quiet = True
wp.init()


@wp.kernel
def horner(x: wp.array2d(dtype=float), c: wp.array2d(dtype=float), y: wp.array2d(dtype=float)):
    i, j = wp.tid()
    v = x[i, j]
    acc = wp.float32(0.0)
    for k in range(5):  # constant trip count: unrolled
        acc = acc * v + c[j, k]
    y[i, j] = acc


class WarpPoly(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, coeffs):
        xw = wp.from_torch(x.detach().contiguous(), requires_grad=True)
        cw = wp.from_torch(coeffs.detach().contiguous(), requires_grad=True)
        yw = wp.zeros(xw.shape, dtype=float, requires_grad=True, device=xw.device)
        tape = wp.Tape()
        with tape:
            wp.launch(horner, dim=xw.shape, inputs=[xw, cw], outputs=[yw], device=xw.device)
        ctx.tape, ctx.xw, ctx.cw, ctx.yw = tape, xw, cw, yw
        return wp.to_torch(yw, requires_grad=False)

    @staticmethod
    def backward(ctx, grad_y):
        ctx.tape.backward(grads={ctx.yw: wp.from_torch(grad_y.contiguous())})
        return wp.to_torch(ctx.xw.grad), wp.to_torch(ctx.cw.grad)


def torch_poly(x, coeffs):
    acc = torch.zeros_like(x)
    for k in range(coeffs.shape[1]):
        acc = acc * x + coeffs[:, k]
    return acc


@dataclasses.dataclass
class Config:
    n_in: int = 4
    width: int = 8
    batch: int = 32
    lr: float = 0.05
    steps: int = 10
    seed: int = 5


class PolyNet(torch.nn.Module):
    def __init__(self, cfg: Config, poly=WarpPoly.apply):
        super().__init__()
        self.inp = torch.nn.Linear(cfg.n_in, cfg.width)
        coeffs = torch.zeros(cfg.width, 5)
        coeffs[:, 2] = 0.1 * torch.randn(cfg.width)
        coeffs[:, 3] = 1.0  # starts as y = x + small quadratic
        self.coeffs = torch.nn.Parameter(coeffs)
        self.out = torch.nn.Linear(cfg.width, 1)
        self.poly = poly

    def forward(self, x):
        return self.out(self.poly(torch.tanh(self.inp(x)), self.coeffs))


def check(cfg, model, x, y):
    ref = PolyNet(cfg, poly=torch_poly)
    ref.load_state_dict(model.state_dict())
    worst = 0.0
    for _ in range(2):
        got = torch.autograd.grad(torch.nn.functional.mse_loss(model(x), y), list(model.parameters()))
        exp = torch.autograd.grad(torch.nn.functional.mse_loss(ref(x), y), list(ref.parameters()))
        for g, e in zip(got, exp):
            worst = max(worst, float((g - e).abs().max() / (e.abs().max() + 1e-12)))
    print(f"q05 check: max rel grad diff vs torch {worst:.2e}")
    assert worst < 1e-4, worst


def main(cfg: Config = Config()):
    torch.manual_seed(cfg.seed)
    model = PolyNet(cfg)
    x = torch.randn(cfg.batch, cfg.n_in)
    y = (x[:, :1] ** 2 - x[:, 1:2]).tanh()
    if "--check" in sys.argv[1:]:
        check(cfg, model, x, y)
    opt = torch.optim.Adagrad(model.parameters(), lr=cfg.lr)
    for _ in range(cfg.steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    print("q05 adagrad loss", round(loss.item(), 5))
    return 0


if __name__ == "__main__":
    sys.exit(main())
