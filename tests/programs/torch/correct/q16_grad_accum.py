"""q16: deliberate gradient accumulation: 12 micro-batches, loss divided by ACCUM = 3, optimizer.step() and
zero_grad() only at every 3rd micro-batch (4 optimizer steps in all).

Feature: gradient accumulation over micro-batches. The Warp layer (a row reduction, out[i] = sum_j w[j] * sin(h[i,j]),
by wp.atomic_add) runs on persistent buffers: each forward copies the micro-batch in, tape.reset()s and records
again; backward returns .clone()s of the adjoints, so every micro-batch's gradient is its own and torch does the
accumulating into .grad. Correct; ``--check`` compares one micro-batch's gradients with torch, and the accumulated
gradient of 3 micro-batches with the full-batch gradient.
"""

import sys

import torch
import warp as wp

wp.config.quiet = True
wp.init()

ACCUM = 3


@wp.kernel
def sin_pool(h: wp.array2d(dtype=float), w: wp.array(dtype=float), out: wp.array(dtype=float)):
    i, j = wp.tid()
    wp.atomic_add(out, i, w[j] * wp.sin(h[i, j]))


class PoolBuffers:
    def __init__(self, batch, width):
        self.h = wp.zeros((batch, width), dtype=float, requires_grad=True, device="cpu")
        self.w = wp.zeros(width, dtype=float, requires_grad=True, device="cpu")
        self.out = wp.zeros(batch, dtype=float, requires_grad=True, device="cpu")
        self.tape = wp.Tape()


class WarpSinPool(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, w, bufs):
        wp.copy(bufs.h, wp.from_torch(h.detach().contiguous(), requires_grad=False))
        wp.copy(bufs.w, wp.from_torch(w.detach().contiguous(), requires_grad=False))
        bufs.out.zero_()  # the launch accumulates into out
        bufs.tape.reset()
        with bufs.tape:
            wp.launch(sin_pool, dim=bufs.h.shape, inputs=[bufs.h, bufs.w], outputs=[bufs.out], device="cpu")
        ctx.bufs = bufs
        return wp.to_torch(bufs.out, requires_grad=False).clone()

    @staticmethod
    def backward(ctx, grad_out):
        b = ctx.bufs
        b.tape.backward(grads={b.out: wp.from_torch(grad_out.contiguous())})
        return wp.to_torch(b.h.grad).clone(), wp.to_torch(b.w.grad).clone(), None


class PoolNet(torch.nn.Module):
    def __init__(self, micro_batch, width=12, use_warp=True):
        super().__init__()
        self.enc = torch.nn.Linear(4, width)
        self.w = torch.nn.Parameter(torch.randn(width) * 0.3)
        self.bias = torch.nn.Parameter(torch.zeros(1))
        self.bufs = PoolBuffers(micro_batch, width) if use_warp else None

    def forward(self, x):
        h = self.enc(x)
        pooled = WarpSinPool.apply(h, self.w, self.bufs) if self.bufs else (torch.sin(h) * self.w).sum(1)
        return pooled + self.bias


def rel(got, exp):
    return max(float((g - e).abs().max() / (e.abs().max() + 1e-12)) for g, e in zip(got, exp))


def check(model, xs, ys):
    ref = PoolNet(xs[0].shape[0], use_warp=False)
    ref.load_state_dict(model.state_dict())
    params, rparams = list(model.parameters()), list(ref.parameters())
    worst = 0.0
    for x, y in zip(xs[:2], ys[:2]):
        got = torch.autograd.grad(torch.nn.functional.mse_loss(model(x), y), params)
        exp = torch.autograd.grad(torch.nn.functional.mse_loss(ref(x), y), rparams)
        worst = max(worst, rel(got, exp))
    acc = [torch.zeros_like(p) for p in params]
    for x, y in zip(xs[:ACCUM], ys[:ACCUM]):
        for a, g in zip(acc, torch.autograd.grad(torch.nn.functional.mse_loss(model(x), y) / ACCUM, params)):
            a += g
    full = torch.autograd.grad(torch.nn.functional.mse_loss(ref(torch.cat(xs[:ACCUM])), torch.cat(ys[:ACCUM])), rparams)
    worst = max(worst, rel(acc, full))
    print(f"q16 check: max rel grad diff vs torch {worst:.2e}")
    assert worst < 1e-4, worst


def main():
    torch.manual_seed(16)
    micro = 8
    xs = [torch.randn(micro, 4) for _ in range(12)]
    ys = [x[:, 0] - 0.5 * x[:, 1] ** 2 for x in xs]
    model = PoolNet(micro)
    if "--check" in sys.argv[1:]:
        check(model, xs, ys)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    opt.zero_grad()
    for i, (x, y) in enumerate(zip(xs, ys)):
        loss = torch.nn.functional.mse_loss(model(x), y) / ACCUM
        loss.backward()
        if (i + 1) % ACCUM == 0:
            opt.step()
            opt.zero_grad()
    print("q16 accumulation loss", round(loss.item() * ACCUM, 5))
    return 0


if __name__ == "__main__":
    sys.exit(main())
