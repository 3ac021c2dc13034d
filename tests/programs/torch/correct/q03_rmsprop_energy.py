"""q03: functional style (a dict of parameter tensors, no nn.Module) with a Warp reduction kernel, trained with RMSprop.

Feature: torch.optim.RMSprop. The Warp kernel reduces each row to a weighted energy, e[i] = sum_j w[j] * h[i,j]^2,
with wp.atomic_add into a fresh zeroed output; its Function returns Warp's adjoints of h and w. Correct;
``--check`` compares the gradients with the same function written in torch.
"""

import sys

import torch
import warp as wp

wp.config.quiet = True
wp.init()


@wp.kernel
def weighted_energy(h: wp.array2d(dtype=float), w: wp.array(dtype=float), e: wp.array(dtype=float)):
    i, j = wp.tid()
    wp.atomic_add(e, i, w[j] * h[i, j] * h[i, j])


class WarpEnergy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, w):
        hw = wp.from_torch(h.detach().contiguous(), requires_grad=True)
        ww = wp.from_torch(w.detach().contiguous(), requires_grad=True)
        ew = wp.zeros(h.shape[0], dtype=float, requires_grad=True, device=hw.device)
        tape = wp.Tape()
        with tape:
            wp.launch(weighted_energy, dim=h.shape, inputs=[hw, ww], outputs=[ew], device=hw.device)
        ctx.save = (tape, hw, ww, ew)
        return wp.to_torch(ew, requires_grad=False)

    @staticmethod
    def backward(ctx, grad_e):
        tape, hw, ww, ew = ctx.save
        ew.grad = wp.from_torch(grad_e.contiguous().clone())  # an adjoint buffer of its own: Warp may zero it
        tape.backward()
        return wp.to_torch(hw.grad), wp.to_torch(ww.grad)


def init_params(gen):
    return {
        "W1": (torch.randn(5, 10, generator=gen) * 0.4).requires_grad_(),
        "b1": torch.zeros(10).requires_grad_(),
        "w_energy": torch.full((10,), 0.1).requires_grad_(),
        "W2": (torch.randn(10, generator=gen) * 0.1).requires_grad_(),
    }


def predict(params, x, energy=WarpEnergy.apply):
    h = torch.tanh(x @ params["W1"] + params["b1"])
    return energy(h, params["w_energy"]) + h @ params["W2"]


def torch_energy(h, w):
    return (h * h * w).sum(1)


def check(params, x, y):
    worst = 0.0
    names = list(params)
    for _ in range(2):
        got = torch.autograd.grad(((predict(params, x) - y) ** 2).mean(), [params[n] for n in names])
        exp = torch.autograd.grad(((predict(params, x, torch_energy) - y) ** 2).mean(), [params[n] for n in names])
        for g, e in zip(got, exp):
            worst = max(worst, float((g - e).abs().max() / (e.abs().max() + 1e-12)))
    print(f"q03 check: max rel grad diff vs torch {worst:.2e}")
    assert worst < 1e-4, worst


def main():
    gen = torch.Generator().manual_seed(3)
    params = init_params(gen)
    x = torch.randn(20, 5, generator=gen)
    y = x.pow(2).sum(1) * 0.2
    if "--check" in sys.argv[1:]:
        check(params, x, y)
    opt = torch.optim.RMSprop(params.values(), lr=5e-3, alpha=0.9)
    for _ in range(10):
        opt.zero_grad()
        loss = ((predict(params, x) - y) ** 2).mean()
        loss.backward()
        opt.step()
    print("q03 rmsprop loss", round(loss.item(), 5))
    return 0


if __name__ == "__main__":
    sys.exit(main())
