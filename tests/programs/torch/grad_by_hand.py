"""Parameters an optimizer holds that backward never gives a gradient, on purpose and by mistake (issue 43: no false
error on correct torch programs).

A binarised layer in the XNOR-Net style trains full-precision weights ``w_fp`` that the forward never uses: it
multiplies by ``sign(w_fp)``, a separate leaf, and the program copies that leaf's gradient into ``w_fp.grad`` by
hand before the step (a straight-through estimator). A channel mask ``mask`` is kept as a Parameter (so that it is
saved with the model) and read in the forward only through ``mask.data.numpy()`` to pick the channels.

- ``correct``: both as described. Nothing is missing: ``w_fp`` trains on the program's gradient; ``mask`` is not
  meant to learn (a warning says it is a Parameter nothing trains, read only through ``.data``).
- ``forgot``: the program forgets to copy the gradient: ``w_fp`` never moves (an error).
- ``detached``: the forward uses ``scale.detach()`` where it means ``scale``: ``scale`` never learns (an error).
"""

import argparse
import sys

import numpy as np
import torch


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", choices=("correct", "forgot", "detached"), default="correct")
    args = parser.parse_args()
    torch.manual_seed(0)
    w_fp = torch.nn.Parameter(torch.randn(6, 4) * 0.1)
    scale = torch.nn.Parameter(torch.ones(6))
    mask = torch.nn.Parameter(torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 1.0]))
    head = torch.nn.Linear(4, 1)
    optimizer = torch.optim.Adam([w_fp, scale, mask, *head.parameters()], lr=1e-2)
    start = w_fp.detach().clone()
    for _step in range(4):
        x = torch.randn(16, 4)
        target = x.sum(1)
        optimizer.zero_grad()
        w_bin = torch.sign(w_fp.detach()).requires_grad_()
        h = torch.tanh(x @ w_bin.T) * (scale.detach() if args.case == "detached" else scale)
        keep = np.argwhere(mask.data.numpy()).reshape(-1)
        y = head(h[:, keep].sum(1, keepdim=True).expand(-1, 4)).reshape(-1)
        loss = ((y - target) ** 2).mean()
        loss.backward()
        if args.case != "forgot":
            w_fp.grad = w_bin.grad.clone()
        optimizer.step()
    print(f"loss {float(loss.detach()):.5f}, w_fp moved {float((w_fp.detach() - start).abs().max()):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
