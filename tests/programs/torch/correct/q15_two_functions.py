"""q15: several Warp Functions in one step: a Warp linear layer (matmul kernel with a loop), a Warp swish, and the
same Warp linear Function again with other weights (each call has its own fresh arrays and tape, so the two
applications never share buffers).

Feature: several Warp autograd.Functions per step (two different Functions, one of them applied twice). Correct;
``--check`` compares with the same network in pure torch.
"""

import sys

import torch
import warp as wp

wp.config.quiet = True
wp.init()


@wp.kernel
def dense(x: wp.array2d(dtype=float), w: wp.array2d(dtype=float), b: wp.array(dtype=float), y: wp.array2d(dtype=float)):
    i, j = wp.tid()
    acc = b[j]
    for k in range(x.shape[1]):
        acc = acc + x[i, k] * w[j, k]
    y[i, j] = acc


@wp.kernel
def swish(x: wp.array2d(dtype=float), y: wp.array2d(dtype=float)):
    i, j = wp.tid()
    v = x[i, j]
    y[i, j] = v / (1.0 + wp.exp(-v))


def run_on_tape(kernel, dim, inputs, out_shape):
    """Fresh arrays and a fresh tape: returns (tape, input arrays, output array)."""
    arrays = [wp.from_torch(t.detach().contiguous(), requires_grad=True) for t in inputs]
    out = wp.zeros(out_shape, dtype=float, requires_grad=True, device=arrays[0].device)
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, dim=dim, inputs=arrays, outputs=[out], device=out.device)
    return tape, arrays, out


class WarpDense(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b):
        shape = (x.shape[0], w.shape[0])
        ctx.tape, ctx.arrays, ctx.out = run_on_tape(dense, shape, (x, w, b), shape)
        return wp.to_torch(ctx.out, requires_grad=False)

    @staticmethod
    def backward(ctx, grad):
        ctx.tape.backward(grads={ctx.out: wp.from_torch(grad.contiguous())})
        return tuple(wp.to_torch(a.grad) for a in ctx.arrays)


class WarpSwish(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.tape, ctx.arrays, ctx.out = run_on_tape(swish, x.shape, (x,), x.shape)
        return wp.to_torch(ctx.out, requires_grad=False)

    @staticmethod
    def backward(ctx, grad):
        ctx.tape.backward(grads={ctx.out: wp.from_torch(grad.contiguous())})
        return wp.to_torch(ctx.arrays[0].grad)


class Layer(torch.nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(n_out, n_in) / n_in**0.5)
        self.bias = torch.nn.Parameter(torch.zeros(n_out))


class TwoLayer(torch.nn.Module):
    def __init__(self, use_warp=True):
        super().__init__()
        self.l1, self.l2 = Layer(5, 12), Layer(12, 3)
        self.use_warp = use_warp

    def forward(self, x):
        if self.use_warp:
            h = WarpSwish.apply(WarpDense.apply(x, self.l1.weight, self.l1.bias))
            return WarpDense.apply(h, self.l2.weight, self.l2.bias)
        h = torch.nn.functional.silu(torch.nn.functional.linear(x, self.l1.weight, self.l1.bias))
        return torch.nn.functional.linear(h, self.l2.weight, self.l2.bias)


def check(model, x, y):
    ref = TwoLayer(use_warp=False)
    ref.load_state_dict(model.state_dict())
    worst = 0.0
    for _ in range(2):
        got = torch.autograd.grad(torch.nn.functional.mse_loss(model(x), y), list(model.parameters()))
        exp = torch.autograd.grad(torch.nn.functional.mse_loss(ref(x), y), list(ref.parameters()))
        for g, e in zip(got, exp):
            worst = max(worst, float((g - e).abs().max() / (e.abs().max() + 1e-12)))
    print(f"q15 check: max rel grad diff vs torch {worst:.2e}")
    assert worst < 1e-4, worst


def main():
    torch.manual_seed(15)
    model = TwoLayer()
    x = torch.randn(16, 5)
    y = torch.stack([x[:, 0].sin(), x[:, 1] * x[:, 2], x[:, 3:].sum(1)], dim=1)
    if "--check" in sys.argv[1:]:
        check(model, x, y)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(10):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    print("q15 two-functions loss", round(loss.item(), 5))
    return 0


if __name__ == "__main__":
    sys.exit(main())
