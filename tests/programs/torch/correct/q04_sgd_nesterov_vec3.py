"""q04: a point-cloud model with a Warp vec3 kernel (scale plus a cross product with a learned axis), a trainer class,
and SGD with Nesterov momentum.

Feature: torch.optim.SGD(momentum=0.9, nesterov=True). The Warp Function wraps (N, 3) tensors as wp.vec3 arrays,
records q = s * p + axis x p on a fresh tape, and returns Warp's adjoints of p, axis and s (reshaped to the
parameters' shapes). Correct; ``--check`` compares with torch.cross.
"""

import sys

import torch
import warp as wp

wp.config.quiet = True
wp.init()


@wp.kernel
def twist(
    p: wp.array(dtype=wp.vec3),
    axis: wp.array(dtype=wp.vec3),
    s: wp.array(dtype=wp.float32),
    q: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    v = p[i]
    q[i] = v * s[0] + wp.cross(axis[0], v)


class WarpTwist(torch.autograd.Function):
    @staticmethod
    def forward(ctx, p, axis, s):
        pw = wp.from_torch(p.detach().contiguous(), dtype=wp.vec3, requires_grad=True)
        aw = wp.from_torch(axis.detach().reshape(1, 3).contiguous(), dtype=wp.vec3, requires_grad=True)
        sw = wp.from_torch(s.detach().contiguous(), requires_grad=True)
        qw = wp.zeros(pw.shape, dtype=wp.vec3, requires_grad=True, device=pw.device)
        tape = wp.Tape()
        with tape:
            wp.launch(twist, dim=pw.shape, inputs=[pw, aw, sw], outputs=[qw], device=pw.device)
        ctx.tape, ctx.arrays, ctx.qw = tape, (pw, aw, sw), qw
        return wp.to_torch(qw, requires_grad=False)

    @staticmethod
    def backward(ctx, grad_q):
        ctx.tape.backward(grads={ctx.qw: wp.from_torch(grad_q.contiguous(), dtype=wp.vec3)})
        pw, aw, sw = ctx.arrays
        return wp.to_torch(pw.grad), wp.to_torch(aw.grad).reshape(3), wp.to_torch(sw.grad)


class PointModel(torch.nn.Module):
    def __init__(self, use_warp=True):
        super().__init__()
        self.pre = torch.nn.Linear(3, 3)
        self.axis = torch.nn.Parameter(torch.tensor([0.1, -0.2, 0.3]))
        self.scale = torch.nn.Parameter(torch.ones(1))
        self.use_warp = use_warp

    def forward(self, p):
        p = self.pre(p)
        if self.use_warp:
            return WarpTwist.apply(p, self.axis, self.scale)
        return p * self.scale + torch.cross(self.axis.expand_as(p), p, dim=1)


class Trainer:
    def __init__(self, model, lr=0.02):
        self.model = model
        self.opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, nesterov=True)

    def loss(self, p, target):
        return ((self.model(p) - target) ** 2).sum(1).mean()

    def step(self, p, target):
        self.opt.zero_grad()
        loss = self.loss(p, target)
        loss.backward()
        self.opt.step()
        return loss.item()

    def check(self, p, target):
        ref = PointModel(use_warp=False)
        ref.load_state_dict(self.model.state_dict())
        worst = 0.0
        for _ in range(2):
            got = torch.autograd.grad(self.loss(p, target), list(self.model.parameters()))
            exp = torch.autograd.grad(((ref(p) - target) ** 2).sum(1).mean(), list(ref.parameters()))
            for g, e in zip(got, exp):
                worst = max(worst, float((g - e).abs().max() / (e.abs().max() + 1e-12)))
        print(f"q04 check: max rel grad diff vs torch {worst:.2e}")
        assert worst < 1e-4, worst


def main():
    torch.manual_seed(4)
    p = torch.randn(64, 3)
    rot = torch.linalg.qr(torch.randn(3, 3))[0]
    target = 1.3 * p @ rot.T
    trainer = Trainer(PointModel())
    if "--check" in sys.argv[1:]:
        trainer.check(p, target)
    for _ in range(12):
        loss = trainer.step(p, target)
    print("q04 nesterov loss", round(loss, 5))
    return 0


if __name__ == "__main__":
    sys.exit(main())
