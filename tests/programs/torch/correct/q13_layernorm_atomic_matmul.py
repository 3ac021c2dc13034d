"""q13: a Warp matmul over a 3-D launch (i, j, k) that reduces with wp.atomic_add into a zeroed output, followed by
LayerNorm, GELU and a linear head, trained with Adam.

Feature: torch.nn.LayerNorm. The Warp Function (y = x @ W.T, bias added in torch) makes fresh arrays and a fresh
tape per call and returns Warp's adjoints of x and W. Correct; ``--check`` compares with x @ W.T in torch.
"""

import sys

import torch
import warp as wp

wp.config.quiet = True
wp.init()


@wp.kernel
def matmul_atomic(x: wp.array2d(dtype=float), w: wp.array2d(dtype=float), y: wp.array2d(dtype=float)):
    i, j, k = wp.tid()
    wp.atomic_add(y, i, j, x[i, k] * w[j, k])


class WarpMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        xw = wp.from_torch(x.detach().contiguous(), requires_grad=True)
        ww = wp.from_torch(w.detach().contiguous(), requires_grad=True)
        yw = wp.zeros((xw.shape[0], ww.shape[0]), dtype=float, requires_grad=True, device=xw.device)
        tape = wp.Tape()
        with tape:
            wp.launch(
                matmul_atomic,
                dim=(xw.shape[0], ww.shape[0], xw.shape[1]),
                inputs=[xw, ww],
                outputs=[yw],
                device=xw.device,
            )
        ctx.tape, ctx.xw, ctx.ww, ctx.yw = tape, xw, ww, yw
        return wp.to_torch(yw, requires_grad=False)

    @staticmethod
    def backward(ctx, grad_y):
        ctx.tape.backward(grads={ctx.yw: wp.from_torch(grad_y.contiguous())})
        return wp.to_torch(ctx.xw.grad), wp.to_torch(ctx.ww.grad)


class LNNet(torch.nn.Module):
    def __init__(self, use_warp=True):
        super().__init__()
        self.w_in = torch.nn.Parameter(torch.randn(16, 6) * 0.4)
        self.b_in = torch.nn.Parameter(torch.zeros(16))
        self.norm = torch.nn.LayerNorm(16)
        self.head = torch.nn.Linear(16, 2)
        self.use_warp = use_warp

    def forward(self, x):
        h = WarpMatmul.apply(x, self.w_in) if self.use_warp else x @ self.w_in.T
        return self.head(torch.nn.functional.gelu(self.norm(h + self.b_in)))


def check(model, x, y):
    ref = LNNet(use_warp=False)
    ref.load_state_dict(model.state_dict())
    worst = 0.0
    for _ in range(2):
        got = torch.autograd.grad(torch.nn.functional.mse_loss(model(x), y), list(model.parameters()))
        exp = torch.autograd.grad(torch.nn.functional.mse_loss(ref(x), y), list(ref.parameters()))
        for g, e in zip(got, exp):
            worst = max(worst, float((g - e).abs().max() / (e.abs().max() + 1e-12)))
    print(f"q13 check: max rel grad diff vs torch {worst:.2e}")
    assert worst < 1e-4, worst


def main():
    torch.manual_seed(13)
    model = LNNet()
    x = torch.randn(20, 6)
    y = torch.stack([x[:, 0] * x[:, 1], x[:, 2:].sum(1).sin()], dim=1)
    if "--check" in sys.argv[1:]:
        check(model, x, y)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(10):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    print("q13 layernorm loss", round(loss.item(), 5))
    return 0


if __name__ == "__main__":
    sys.exit(main())
