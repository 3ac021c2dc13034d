"""q07: CPU mixed precision: the linear layers run under torch.autocast("cpu", dtype=torch.bfloat16); the Warp layer
(a softplus with a learned per-feature sharpness) runs outside autocast in float32, on h.float().

Feature: AMP autocast on CPU with bfloat16 around the non-Warp part. The Warp Function sees float32 tensors only,
makes fresh arrays and a fresh tape per call, and returns float32 adjoints; torch casts the gradient back to
bfloat16 at the .float() boundary. Correct; ``--check`` compares the Warp Function alone with torch in float32
(the whole model differs by bfloat16 rounding, so it is not compared end to end).
"""

import sys

import torch
import warp as wp

wp.config.quiet = True
wp.init()


@wp.kernel
def softplus(x: wp.array2d(dtype=wp.float32), beta: wp.array(dtype=wp.float32), y: wp.array2d(dtype=wp.float32)):
    i, j = wp.tid()
    bj = beta[j]
    y[i, j] = wp.log(1.0 + wp.exp(bj * x[i, j])) / bj


class WarpSoftplus(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, beta):
        assert x.dtype == torch.float32 and beta.dtype == torch.float32
        xw = wp.from_torch(x.detach().contiguous(), requires_grad=True)
        bw = wp.from_torch(beta.detach().contiguous(), requires_grad=True)
        yw = wp.zeros(xw.shape, dtype=wp.float32, requires_grad=True, device=xw.device)
        tape = wp.Tape()
        with tape:
            wp.launch(softplus, dim=xw.shape, inputs=[xw, bw], outputs=[yw], device=xw.device)
        ctx.tape, ctx.xw, ctx.bw, ctx.yw = tape, xw, bw, yw
        return wp.to_torch(yw, requires_grad=False)

    @staticmethod
    def backward(ctx, grad_y):
        ctx.tape.backward(grads={ctx.yw: wp.from_torch(grad_y.float().contiguous())})
        return wp.to_torch(ctx.xw.grad), wp.to_torch(ctx.bw.grad)


def torch_softplus(x, beta):
    return torch.log1p(torch.exp(beta * x)) / beta


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16))
        self.beta = torch.nn.Parameter(torch.full((16,), 1.5))
        self.head = torch.nn.Linear(16, 1)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = self.enc(x)
        z = WarpSoftplus.apply(h.float(), self.beta)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = self.head(z)
        return out.float()


def check():
    gen = torch.Generator().manual_seed(70)
    x = torch.randn(12, 16, generator=gen, requires_grad=True)
    beta = (torch.rand(16, generator=gen) + 0.5).requires_grad_()
    w = torch.randn(12, 16, generator=gen)
    worst = 0.0
    for _ in range(2):
        got = torch.autograd.grad((WarpSoftplus.apply(x, beta) * w).sum(), (x, beta))
        exp = torch.autograd.grad((torch_softplus(x, beta) * w).sum(), (x, beta))
        for g, e in zip(got, exp):
            worst = max(worst, float((g - e).abs().max() / (e.abs().max() + 1e-12)))
    print(f"q07 check: max rel grad diff vs torch {worst:.2e}")
    assert worst < 1e-4, worst


def main():
    torch.manual_seed(7)
    if "--check" in sys.argv[1:]:
        check()
    model = Model()
    x = torch.randn(64, 8)
    y = x[:, :4].abs().sum(1, keepdim=True) * 0.3
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    for _ in range(10):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    print("q07 autocast-bf16 loss", round(loss.item(), 4), "beta.grad dtype", model.beta.grad.dtype)
    return 0


if __name__ == "__main__":
    sys.exit(main())
