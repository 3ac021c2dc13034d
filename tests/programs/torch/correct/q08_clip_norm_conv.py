"""q08: a learned 3-tap 1-D convolution over the feature axis run by Warp (a constant-bound loop with zero padding
by a branch), with clip_grad_norm_ applied after backward and BEFORE optimizer.step().

Feature: gradient clipping with torch.nn.utils.clip_grad_norm_ (max_norm 0.5) in the right place. The Warp Function
makes fresh arrays and a fresh tape per call. Correct; ``--check`` compares with torch's conv1d (cross-correlation,
padding 1).
"""

import sys

import torch
import warp as wp

wp.config.quiet = True
wp.init()


@wp.kernel
def conv3(x: wp.array2d(dtype=float), k: wp.array(dtype=float), y: wp.array2d(dtype=float)):
    i, j = wp.tid()
    n = x.shape[1]
    acc = wp.float32(0.0)
    for t in range(3):
        jj = j + t - 1
        if jj >= 0 and jj < n:
            acc += k[t] * x[i, jj]
    y[i, j] = acc


class WarpConv3(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        xw = wp.from_torch(x.detach().contiguous(), requires_grad=True)
        kw = wp.from_torch(k.detach().contiguous(), requires_grad=True)
        yw = wp.zeros(xw.shape, dtype=float, requires_grad=True, device=xw.device)
        tape = wp.Tape()
        with tape:
            wp.launch(conv3, dim=xw.shape, inputs=[xw, kw], outputs=[yw], device=xw.device)
        ctx.state = tape, xw, kw, yw
        return wp.to_torch(yw, requires_grad=False)

    @staticmethod
    def backward(ctx, grad_y):
        tape, xw, kw, yw = ctx.state
        tape.backward(grads={yw: wp.from_torch(grad_y.contiguous())})
        return wp.to_torch(xw.grad), wp.to_torch(kw.grad)


def torch_conv3(x, k):
    return torch.nn.functional.conv1d(x.unsqueeze(1), k.view(1, 1, 3), padding=1).squeeze(1)


class ConvNet(torch.nn.Module):
    def __init__(self, conv=WarpConv3.apply):
        super().__init__()
        self.lift = torch.nn.Linear(3, 12)
        self.taps = torch.nn.Parameter(torch.tensor([0.25, 0.5, 0.25]))
        self.head = torch.nn.Linear(12, 1)
        self.conv = conv

    def forward(self, x):
        return self.head(torch.relu(self.conv(self.lift(x), self.taps)))


def check(model, x, y):
    ref = ConvNet(conv=torch_conv3)
    ref.load_state_dict(model.state_dict())
    worst = 0.0
    for _ in range(2):
        got = torch.autograd.grad(torch.nn.functional.mse_loss(model(x), y), list(model.parameters()))
        exp = torch.autograd.grad(torch.nn.functional.mse_loss(ref(x), y), list(ref.parameters()))
        for g, e in zip(got, exp):
            worst = max(worst, float((g - e).abs().max() / (e.abs().max() + 1e-12)))
    print(f"q08 check: max rel grad diff vs torch {worst:.2e}")
    assert worst < 1e-4, worst


def main():
    torch.manual_seed(8)
    model = ConvNet()
    x = torch.randn(32, 3)
    y = 3.0 * x.sum(1, keepdim=True) ** 2  # large targets: the raw gradient norm is well above 0.5
    if "--check" in sys.argv[1:]:
        check(model, x, y)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    norms = []
    for _ in range(10):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)))
        opt.step()
    print("q08 clip-norm loss", round(loss.item(), 4), "pre-clip norms", [round(n, 2) for n in norms[:3]], "...")
    return 0


if __name__ == "__main__":
    sys.exit(main())
