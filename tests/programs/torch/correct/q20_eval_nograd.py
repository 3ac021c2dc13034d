"""q20: a regression model with a Warp layer y = tanh(x @ W.T + b) made of two launches on one tape (an affine
kernel with a loop over the inputs, then tanh in a second kernel), evaluated on a held-out set under
torch.no_grad() and model.eval() after every training step, then put back in train mode.

Feature: evaluation under torch.no_grad() between training steps. The Warp Function is called in both modes (under
no_grad it runs forward only; its tape is never played back); the gradients of the training steps are unaffected.
Correct; ``--check`` compares with torch.
"""

import sys

import torch
import warp as wp

wp.config.quiet = True
wp.init()


@wp.kernel
def affine(
    x: wp.array2d(dtype=float), w: wp.array2d(dtype=float), b: wp.array(dtype=float), z: wp.array2d(dtype=float)
):
    i, j = wp.tid()
    acc = wp.float32(0.0)
    for k in range(x.shape[1]):
        acc += x[i, k] * w[j, k]
    z[i, j] = acc + b[j]


@wp.kernel
def tanh_kernel(z: wp.array2d(dtype=float), y: wp.array2d(dtype=float)):
    i, j = wp.tid()
    y[i, j] = wp.tanh(z[i, j])


class WarpDenseTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b):
        arrays = [wp.from_torch(t.detach().contiguous(), requires_grad=True) for t in (x, w, b)]
        shape = (x.shape[0], w.shape[0])
        z = wp.zeros(shape, dtype=float, requires_grad=True, device=arrays[0].device)
        y = wp.zeros(shape, dtype=float, requires_grad=True, device=arrays[0].device)
        tape = wp.Tape()
        with tape:
            wp.launch(affine, dim=shape, inputs=arrays, outputs=[z], device=z.device)
            wp.launch(tanh_kernel, dim=shape, inputs=[z], outputs=[y], device=z.device)
        ctx.tape, ctx.arrays, ctx.y = tape, arrays, y
        return wp.to_torch(y, requires_grad=False)

    @staticmethod
    def backward(ctx, grad_y):
        ctx.tape.backward(grads={ctx.y: wp.from_torch(grad_y.contiguous())})
        return tuple(wp.to_torch(a.grad) for a in ctx.arrays)


class Regressor(torch.nn.Module):
    def __init__(self, use_warp=True):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(10, 4) * 0.5)
        self.b = torch.nn.Parameter(torch.zeros(10))
        self.out = torch.nn.Linear(10, 1)
        self.use_warp = use_warp

    def forward(self, x):
        if self.use_warp:
            h = WarpDenseTanh.apply(x, self.w, self.b)
        else:
            h = torch.tanh(x @ self.w.T + self.b)
        return self.out(h)


def check(model, x, y):
    ref = Regressor(use_warp=False)
    ref.load_state_dict(model.state_dict())
    worst = 0.0
    for _ in range(2):
        got = torch.autograd.grad(torch.nn.functional.mse_loss(model(x), y), list(model.parameters()))
        exp = torch.autograd.grad(torch.nn.functional.mse_loss(ref(x), y), list(ref.parameters()))
        for g, e in zip(got, exp):
            worst = max(worst, float((g - e).abs().max() / (e.abs().max() + 1e-12)))
    print(f"q20 check: max rel grad diff vs torch {worst:.2e}")
    assert worst < 1e-4, worst


def target(x):
    return (x[:, :1] * 2).sin() + x[:, 2:3] ** 2


def main():
    torch.manual_seed(20)
    model = Regressor()
    x_train, x_val = torch.randn(32, 4), torch.randn(16, 4)
    y_train, y_val = target(x_train), target(x_val)
    if "--check" in sys.argv[1:]:
        check(model, x_train, y_train)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    history = []
    for _ in range(10):
        model.train()
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x_train), y_train)
        loss.backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            history.append(torch.nn.functional.mse_loss(model(x_val), y_val).item())
    print("q20 train loss", round(loss.item(), 5), "val", [round(v, 4) for v in history[::3]])
    return 0


if __name__ == "__main__":
    sys.exit(main())
