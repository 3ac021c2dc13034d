"""q10: a frozen backbone (requires_grad_(False)) feeding a Warp RBF layer (two launches on one tape: squared
distances reduced with wp.atomic_add over a 3-D launch, then exp) and a head; the optimizer is given only the
trainable parameters. (Not one kernel with a run-time-bounded loop carrying the distance out to the exp: Warp's
adjoint replays such a loop's carried value as 0, a Warp limitation.)

Feature: frozen layers, excluded from the optimizer. The Warp Function returns None for inputs torch does not need
(ctx.needs_input_grad), and Warp's own adjoints for the centers and widths. Correct; ``--check`` compares with
torch.cdist-style RBF features.
"""

import sys

import torch
import warp as wp

wp.config.quiet = True
wp.init()


@wp.kernel
def sqdist(x: wp.array2d(dtype=float), c: wp.array2d(dtype=float), d: wp.array2d(dtype=float)):
    i, j, k = wp.tid()
    diff = x[i, k] - c[j, k]
    wp.atomic_add(d, i, j, diff * diff)


@wp.kernel
def gauss(d: wp.array2d(dtype=float), gamma: wp.array(dtype=float), y: wp.array2d(dtype=float)):
    i, j = wp.tid()
    y[i, j] = wp.exp(-gamma[j] * d[i, j])


class WarpRBF(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, centers, gamma):
        arrays = [wp.from_torch(t.detach().contiguous(), requires_grad=True) for t in (x, centers, gamma)]
        xw, cw, gw = arrays
        d = wp.zeros((x.shape[0], centers.shape[0]), dtype=float, requires_grad=True, device=xw.device)
        y = wp.zeros(d.shape, dtype=float, requires_grad=True, device=xw.device)
        tape = wp.Tape()
        with tape:
            wp.launch(sqdist, dim=(d.shape[0], d.shape[1], xw.shape[1]), inputs=[xw, cw], outputs=[d], device=xw.device)
            wp.launch(gauss, dim=y.shape, inputs=[d, gw], outputs=[y], device=xw.device)
        ctx.tape, ctx.arrays, ctx.y = tape, arrays, y
        return wp.to_torch(y, requires_grad=False)

    @staticmethod
    def backward(ctx, grad_y):
        ctx.tape.backward(grads={ctx.y: wp.from_torch(grad_y.contiguous())})
        return tuple(wp.to_torch(a.grad) if need else None for a, need in zip(ctx.arrays, ctx.needs_input_grad))


def torch_rbf(x, centers, gamma):
    d = ((x[:, None, :] - centers[None, :, :]) ** 2).sum(-1)
    return torch.exp(-gamma * d)


class RBFNet(torch.nn.Module):
    def __init__(self, rbf_fn=WarpRBF.apply):
        super().__init__()
        self.backbone = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh())
        self.centers = torch.nn.Parameter(torch.randn(10, 4) * 0.5)
        self.gamma = torch.nn.Parameter(torch.full((10,), 0.8))
        self.head = torch.nn.Linear(10, 1)
        self.rbf = rbf_fn

    def forward(self, x):
        return self.head(self.rbf(self.backbone(x), self.centers, self.gamma))


def check(model, x, y):
    ref = RBFNet(rbf_fn=torch_rbf)
    ref.load_state_dict(model.state_dict())
    ref.backbone.requires_grad_(False)
    train = [p for p in model.parameters() if p.requires_grad]
    rtrain = [p for p in ref.parameters() if p.requires_grad]
    worst = 0.0
    for _ in range(2):
        got = torch.autograd.grad(torch.nn.functional.mse_loss(model(x), y), train)
        exp = torch.autograd.grad(torch.nn.functional.mse_loss(ref(x), y), rtrain)
        for g, e in zip(got, exp):
            worst = max(worst, float((g - e).abs().max() / (e.abs().max() + 1e-12)))
    print(f"q10 check: max rel grad diff vs torch {worst:.2e}")
    assert worst < 1e-4, worst


def main():
    torch.manual_seed(10)
    model = RBFNet()
    model.backbone.requires_grad_(False)  # pretrained, frozen
    x = torch.randn(30, 5)
    y = torch.tanh(x[:, :2].sum(1, keepdim=True))
    if "--check" in sys.argv[1:]:
        check(model, x, y)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=2e-2)
    for _ in range(10):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    print("q10 frozen-excluded loss", round(loss.item(), 5), "backbone grad", model.backbone[0].weight.grad)
    return 0


if __name__ == "__main__":
    sys.exit(main())
