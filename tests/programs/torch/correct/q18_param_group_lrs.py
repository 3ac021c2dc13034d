"""q18: one Adam optimizer with three parameter groups at different learning rates: the backbone (1e-3), the
Warp layer's own parameters (frequencies and phases of y = sin(freq * x + phase), 2e-2), the head (5e-3).

Feature: param groups with different learning rates. The Warp Function makes fresh arrays and a fresh tape per
call and returns Warp's adjoints of x, freq and phase. Correct; ``--check`` compares with torch.sin.
"""

import argparse
import sys

import torch
import warp as wp

wp.config.quiet = True
wp.init()


@wp.kernel
def sin_features(
    x: wp.array2d(dtype=float), freq: wp.array(dtype=float), phase: wp.array(dtype=float), y: wp.array2d(dtype=float)
):
    i, j = wp.tid()
    y[i, j] = wp.sin(freq[j] * x[i, j] + phase[j])


class WarpSinFeatures(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, freq, phase):
        arrays = [wp.from_torch(t.detach().contiguous(), requires_grad=True) for t in (x, freq, phase)]
        y = wp.zeros(arrays[0].shape, dtype=float, requires_grad=True, device=arrays[0].device)
        tape = wp.Tape()
        with tape:
            wp.launch(sin_features, dim=y.shape, inputs=arrays, outputs=[y], device=y.device)
        ctx.tape, ctx.arrays, ctx.y = tape, arrays, y
        return wp.to_torch(y, requires_grad=False)

    @staticmethod
    def backward(ctx, grad_y):
        ctx.tape.backward(grads={ctx.y: wp.from_torch(grad_y.contiguous())})
        return tuple(wp.to_torch(a.grad) for a in ctx.arrays)


class FourierNet(torch.nn.Module):
    def __init__(self, width=10, use_warp=True):
        super().__init__()
        self.backbone = torch.nn.Linear(3, width)
        self.freq = torch.nn.Parameter(torch.linspace(0.5, 3.0, width))
        self.phase = torch.nn.Parameter(torch.zeros(width))
        self.head = torch.nn.Linear(width, 1)
        self.use_warp = use_warp

    def forward(self, x):
        h = self.backbone(x)
        if self.use_warp:
            h = WarpSinFeatures.apply(h, self.freq, self.phase)
        else:
            h = torch.sin(self.freq * h + self.phase)
        return self.head(h)


def check(model, x, y):
    ref = FourierNet(use_warp=False)
    ref.load_state_dict(model.state_dict())
    worst = 0.0
    for _ in range(2):
        got = torch.autograd.grad(torch.nn.functional.mse_loss(model(x), y), list(model.parameters()))
        exp = torch.autograd.grad(torch.nn.functional.mse_loss(ref(x), y), list(ref.parameters()))
        for g, e in zip(got, exp):
            worst = max(worst, float((g - e).abs().max() / (e.abs().max() + 1e-12)))
    print(f"q18 check: max rel grad diff vs torch {worst:.2e}")
    assert worst < 1e-4, worst


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    torch.manual_seed(18)
    model = FourierNet()
    x = torch.rand(40, 3) * 2 - 1
    y = torch.sin(2.5 * x[:, :1]) + 0.5 * x[:, 1:2]
    if args.check:
        check(model, x, y)
    opt = torch.optim.Adam(
        [
            {"params": model.backbone.parameters(), "lr": 1e-3},
            {"params": [model.freq, model.phase], "lr": 2e-2},
            {"params": model.head.parameters()},  # the default lr below
        ],
        lr=5e-3,
    )
    for _ in range(args.steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    print("q18 param-group loss", round(loss.item(), 5), "lrs", [g["lr"] for g in opt.param_groups])
    return 0


if __name__ == "__main__":
    sys.exit(main())
