"""Shared: a Warp kernel y = sin(x)*w + x*x, its torch twin, a model using it, and a grad comparison."""

import copy

import torch
import warp as wp

wp.config.quiet = True
wp.init()


@wp.kernel
def fwd(x: wp.array(dtype=float), w: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.sin(x[i]) * w[i] + x[i] * x[i]


def torch_twin(x, w):
    return torch.sin(x) * w + x * x


class Net(torch.nn.Module):
    def __init__(self, fn, n=16):
        super().__init__()
        self.lin = torch.nn.Linear(4, n)
        self.w = torch.nn.Parameter(torch.linspace(0.5, 1.5, n))
        self.fn = fn

    def forward(self, inp):
        outs = [self.fn(self.lin(inp[b]), self.w) for b in range(inp.shape[0])]
        return torch.stack(outs)


def train(fn, steps=5, seed=0, lr=1e-2, opt_cls=torch.optim.Adam, loss_of=None):
    torch.manual_seed(seed)
    net = Net(fn)
    ref = copy.deepcopy(net)
    ref.fn = torch_twin
    opt = opt_cls(net.parameters(), lr=lr)
    ropt = opt_cls(ref.parameters(), lr=lr)
    worst = 0.0
    loss_of = loss_of or (lambda out: (out**2).mean())
    for step in range(steps):
        inp = torch.randn(3, 4)
        opt.zero_grad()
        ropt.zero_grad()
        loss = loss_of(net(inp))
        loss.backward()
        rloss = loss_of(ref(inp))
        rloss.backward()
        for p, q in zip(net.parameters(), ref.parameters()):
            worst = max(worst, float((p.grad - q.grad).abs().max() / (q.grad.abs().max() + 1e-12)))
        opt.step()
        ropt.step()
    return worst, float(loss)
