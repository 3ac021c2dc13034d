"""q11: a frozen projection (requires_grad_(False)) that maps features to 4 points in 3-D, a learned per-point shift,
and a Warp chain energy over the points (vec3 differences, dot, wp.atomic_add per sample), with a linear readout.

Feature: frozen layers LEFT in the optimizer: SGD(momentum) gets model.parameters(), the frozen ones included;
their .grad stays None, so the optimizer skips them. The Warp Function wraps (B, 4, 3) tensors as 2-D wp.vec3 arrays,
fresh per call, and returns Warp's adjoints. Correct; ``--check`` compares with the energy written in torch.
"""

import sys

import torch
import warp as wp

wp.config.quiet = True
wp.init()


@wp.kernel
def chain_energy(p: wp.array2d(dtype=wp.vec3), k: wp.array(dtype=float), e: wp.array(dtype=float)):
    b, j = wp.tid()
    d = p[b, j + 1] - p[b, j]
    wp.atomic_add(e, b, k[j] * wp.dot(d, d))


class WarpChainEnergy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, points, stiffness):
        pw = wp.from_torch(points.detach().contiguous(), dtype=wp.vec3, requires_grad=True)
        kw = wp.from_torch(stiffness.detach().contiguous(), requires_grad=True)
        ew = wp.zeros(pw.shape[0], dtype=float, requires_grad=True, device=pw.device)
        tape = wp.Tape()
        with tape:
            wp.launch(chain_energy, dim=(pw.shape[0], pw.shape[1] - 1), inputs=[pw, kw], outputs=[ew], device=pw.device)
        ctx.tape, ctx.pw, ctx.kw, ctx.ew = tape, pw, kw, ew
        return wp.to_torch(ew, requires_grad=False)

    @staticmethod
    def backward(ctx, grad_e):
        ctx.tape.backward(grads={ctx.ew: wp.from_torch(grad_e.contiguous())})
        return wp.to_torch(ctx.pw.grad), wp.to_torch(ctx.kw.grad)


def torch_chain_energy(points, stiffness):
    d = points[:, 1:] - points[:, :-1]
    return ((d * d).sum(-1) * stiffness).sum(1)


class ChainModel(torch.nn.Module):
    def __init__(self, energy=WarpChainEnergy.apply):
        super().__init__()
        self.project = torch.nn.Linear(6, 12)
        self.shift = torch.nn.Parameter(torch.zeros(4, 3))
        self.stiffness = torch.nn.Parameter(torch.ones(3))
        self.readout = torch.nn.Linear(1, 1)
        self.energy = energy

    def forward(self, x):
        pts = self.project(x).view(-1, 4, 3) + self.shift
        return self.readout(self.energy(pts, self.stiffness).unsqueeze(1))


def check(model, x, y):
    ref = ChainModel(energy=torch_chain_energy)
    ref.load_state_dict(model.state_dict())
    ref.project.requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    rparams = [p for p in ref.parameters() if p.requires_grad]
    worst = 0.0
    for _ in range(2):
        got = torch.autograd.grad(torch.nn.functional.mse_loss(model(x), y), params)
        exp = torch.autograd.grad(torch.nn.functional.mse_loss(ref(x), y), rparams)
        for g, e in zip(got, exp):
            worst = max(worst, float((g - e).abs().max() / (e.abs().max() + 1e-12)))
    print(f"q11 check: max rel grad diff vs torch {worst:.2e}")
    assert worst < 1e-4, worst


def main():
    torch.manual_seed(11)
    model = ChainModel()
    model.project.requires_grad_(False)
    x = torch.randn(24, 6)
    y = x.norm(dim=1, keepdim=True)
    if "--check" in sys.argv[1:]:
        check(model, x, y)
    opt = torch.optim.SGD(model.parameters(), lr=5e-3, momentum=0.9)  # frozen params included on purpose
    for _ in range(10):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    print("q11 frozen-in-opt loss", round(loss.item(), 5), "frozen grad", model.project.weight.grad)
    return 0


if __name__ == "__main__":
    sys.exit(main())
