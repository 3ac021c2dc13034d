"""T1c: a pure-torch loop written the old way, through ``.data`` and ``.numpy()`` (bench/torch_overhead.py).

A hand-written SGD step (``p.data.add_(p.grad.data, alpha=-lr)``) and a max-norm clip of the weights after it
(``p.data.clamp_``), a weight norm logged through ``.data`` between the forward and the backward, and the loss
logged through ``.numpy()``: every alias torch does not version that pytorch.unversioned watches, taken where
real loops take them (after the step: no node made since the backward; between the forward and the backward:
fingerprinted on audited forwards).
"""

import argparse

import torch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3000)
    steps = parser.parse_args().steps
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
    x = torch.randn(64, 16)
    target = x[:, :1].sin()
    norm = 0.0
    for _step in range(steps):
        for p in model.parameters():
            p.grad = None
        loss = torch.nn.functional.mse_loss(model(x), target)
        norm = float(model[0].weight.data.norm())
        loss.backward()
        for p in model.parameters():
            p.data.add_(p.grad.data, alpha=-0.05)
            p.data.clamp_(-2.0, 2.0)
        logged = loss.detach().numpy()
    print(f"loss {float(logged):.5f}, first layer norm {norm:.3f}")


if __name__ == "__main__":
    main()
