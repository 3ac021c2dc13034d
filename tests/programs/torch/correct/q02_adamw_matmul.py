"""q02: a hidden layer computed by a small Warp matmul kernel (a loop over the input features), trained with AdamW.

Feature: torch.optim.AdamW with weight_decay (decoupled decay on every parameter, the Warp layer's weight and
bias included). The Warp Function makes fresh arrays and a fresh tape per call and returns Warp's adjoints of x, W
and b. argparse flags: --steps, --weight-decay, --check (compares gradients with torch's F.linear model).
"""

import argparse
import sys

import torch
import warp as wp

wp.config.quiet = True
wp.init()


@wp.kernel
def linear_kernel(
    x: wp.array2d(dtype=wp.float32),
    w: wp.array2d(dtype=wp.float32),
    b: wp.array(dtype=wp.float32),
    y: wp.array2d(dtype=wp.float32),
):
    i, j = wp.tid()
    acc = wp.float32(0.0)
    for k in range(x.shape[1]):
        acc += x[i, k] * w[j, k]
    y[i, j] = acc + b[j]


class WarpLinear(torch.autograd.Function):
    """y = x @ W.T + b with W laid out as nn.Linear's (out, in)."""

    @staticmethod
    def forward(ctx, x, w, b):
        arrays = [wp.from_torch(t.detach().contiguous(), requires_grad=True) for t in (x, w, b)]
        y = wp.zeros((x.shape[0], w.shape[0]), dtype=wp.float32, requires_grad=True, device=arrays[0].device)
        tape = wp.Tape()
        with tape:
            wp.launch(linear_kernel, dim=y.shape, inputs=arrays, outputs=[y], device=y.device)
        ctx.tape, ctx.arrays, ctx.y = tape, arrays, y
        return wp.to_torch(y, requires_grad=False)

    @staticmethod
    def backward(ctx, grad_y):
        ctx.tape.backward(grads={ctx.y: wp.from_torch(grad_y.contiguous())})
        return tuple(wp.to_torch(a.grad) for a in ctx.arrays)


class WarpMLP(torch.nn.Module):
    def __init__(self, n_in=6, width=12, use_warp=True):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(width, n_in) / n_in**0.5)
        self.bias = torch.nn.Parameter(torch.zeros(width))
        self.head = torch.nn.Linear(width, 1)
        self.use_warp = use_warp

    def forward(self, x):
        if self.use_warp:
            h = WarpLinear.apply(x, self.weight, self.bias)
        else:
            h = torch.nn.functional.linear(x, self.weight, self.bias)
        return self.head(torch.tanh(h))


def check(model, x, y):
    ref = WarpMLP(use_warp=False)
    ref.load_state_dict(model.state_dict())
    worst = 0.0
    for _ in range(2):
        got = torch.autograd.grad(torch.nn.functional.mse_loss(model(x), y), list(model.parameters()))
        exp = torch.autograd.grad(torch.nn.functional.mse_loss(ref(x), y), list(ref.parameters()))
        for g, e in zip(got, exp):
            worst = max(worst, float((g - e).abs().max() / (e.abs().max() + 1e-12)))
    print(f"q02 check: max rel grad diff vs torch {worst:.2e}")
    assert worst < 1e-4, worst


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--weight-decay", type=float, default=0.05)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()

    torch.manual_seed(1)
    model = WarpMLP()
    x = torch.randn(24, 6)
    y = (x[:, :3].sum(1, keepdim=True) - x[:, 3:].prod(1, keepdim=True)).tanh()
    if args.check:
        check(model, x, y)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=args.weight_decay)
    for _ in range(args.steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    print("q02 adamw loss", round(loss.item(), 5), "|W|", round(model.weight.norm().item(), 4))
    return 0


if __name__ == "__main__":
    sys.exit(main())
