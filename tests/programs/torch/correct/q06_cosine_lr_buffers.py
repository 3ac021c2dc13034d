"""q06: a gated-tanh layer run by Warp on persistent buffers, trained with Adam under a CosineAnnealingLR schedule.

Feature: an LR scheduler (torch.optim.lr_scheduler.CosineAnnealingLR, scheduler.step() after optimizer.step()).
The Warp side is performance-minded: arrays and tape are made once, each forward copies the new values in,
calls tape.reset() (clears the launches and zeroes every adjoint the tape touched) and records again; backward
copies grad_output into the output's own adjoint and returns .clone()s of the persistent adjoint buffers. Correct
as long as each forward is followed by its backward before the next forward, which this loop does.
"""

import sys

import torch
import warp as wp

wp.config.quiet = True
wp.init()


@wp.kernel
def gated_tanh(a: wp.array2d(dtype=float), b: wp.array2d(dtype=float), y: wp.array2d(dtype=float)):
    i, j = wp.tid()
    y[i, j] = wp.tanh(a[i, j]) / (1.0 + wp.exp(-b[i, j]))


class GateBuffers:
    def __init__(self, shape, device="cpu"):
        self.a = wp.zeros(shape, dtype=float, requires_grad=True, device=device)
        self.b = wp.zeros(shape, dtype=float, requires_grad=True, device=device)
        self.y = wp.zeros(shape, dtype=float, requires_grad=True, device=device)
        self.tape = wp.Tape()


class WarpGate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b, bufs):
        wp.copy(bufs.a, wp.from_torch(a.detach().contiguous(), requires_grad=False))
        wp.copy(bufs.b, wp.from_torch(b.detach().contiguous(), requires_grad=False))
        bufs.tape.reset()
        with bufs.tape:
            wp.launch(gated_tanh, dim=bufs.y.shape, inputs=[bufs.a, bufs.b], outputs=[bufs.y], device=bufs.y.device)
        ctx.bufs = bufs
        return wp.to_torch(bufs.y, requires_grad=False).clone()

    @staticmethod
    def backward(ctx, grad_y):
        bufs = ctx.bufs
        bufs.tape.backward(grads={bufs.y: wp.from_torch(grad_y.contiguous())})
        return wp.to_torch(bufs.a.grad).clone(), wp.to_torch(bufs.b.grad).clone(), None


class GatedNet(torch.nn.Module):
    def __init__(self, batch, width=10, use_warp=True):
        super().__init__()
        self.value = torch.nn.Linear(4, width)
        self.gate = torch.nn.Linear(4, width)
        self.head = torch.nn.Linear(width, 1)
        self.bufs = GateBuffers((batch, width)) if use_warp else None

    def forward(self, x):
        a, b = self.value(x), self.gate(x)
        if self.bufs is not None:
            h = WarpGate.apply(a, b, self.bufs)
        else:
            h = torch.tanh(a) * torch.sigmoid(b)
        return self.head(h)


def check(model, x, y):
    ref = GatedNet(x.shape[0], use_warp=False)
    ref.load_state_dict(model.state_dict())
    worst = 0.0
    for _ in range(3):  # the buffers are reused: the 2nd and 3rd calls test the reset
        got = torch.autograd.grad(torch.nn.functional.mse_loss(model(x), y), list(model.parameters()))
        exp = torch.autograd.grad(torch.nn.functional.mse_loss(ref(x), y), list(ref.parameters()))
        for g, e in zip(got, exp):
            worst = max(worst, float((g - e).abs().max() / (e.abs().max() + 1e-12)))
    print(f"q06 check: max rel grad diff vs torch {worst:.2e}")
    assert worst < 1e-4, worst


def main():
    torch.manual_seed(6)
    x = torch.randn(16, 4)
    y = torch.cos(x[:, :2].sum(1, keepdim=True))
    model = GatedNet(batch=16)
    if "--check" in sys.argv[1:]:
        check(model, x, y)
    steps = 12
    opt = torch.optim.Adam(model.parameters(), lr=2e-2)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps, eta_min=1e-4)
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
    print("q06 cosine loss", round(loss.item(), 5), "lr", f"{sched.get_last_lr()[0]:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
