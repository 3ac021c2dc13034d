"""A Warp Function that writes its input in place through a ``wp.from_torch`` alias, after torch saved that input
for another op's backward (issue 43).

``h = lin(x)``; ``y = h * w`` saves ``h`` (the gradient of ``w`` is ``h``); then ``WarpRelu.apply(h)`` computes
relu with a Warp kernel. ``--case written`` writes the result into ``h`` itself (``out = wp.from_torch(h)``): torch's
version counter does not move, and the gradient of ``w`` is computed from relu(h). ``--case fresh`` writes into a
fresh array (correct); ``--case before`` applies the Function before ``h * w``, so the op saves the written values
(in place still, but torch differentiates what it computed: correct for ``w``). ``--check`` prints the largest
relative difference between the gradient of ``w`` and torch's own.
"""

import argparse
import sys

import torch
import warp as wp


@wp.kernel
def relu(x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = wp.max(x[i], 0.0)


class WarpRelu(torch.autograd.Function):
    case = "written"

    @staticmethod
    def forward(ctx, h):
        x = wp.from_torch(h.detach())
        out = x if WarpRelu.case in ("written", "before") else wp.zeros(h.shape[0], dtype=wp.float32)
        wp.launch(relu, dim=h.shape[0], inputs=[x], outputs=[out])
        result = wp.to_torch(out).clone()
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad):
        (result,) = ctx.saved_tensors
        return grad * (result > 0).to(grad.dtype)


def loss_of(x, lin, w, activation, case):
    h = lin(x)
    if case == "before":
        z = activation(h)
        y = h * w
    else:
        y = h * w  # saves h: the gradient of w is h
        z = activation(h)
    return y.sum() + z.sum()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", choices=("written", "fresh", "before"), default="written")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    wp.config.quiet = True
    wp.init()
    WarpRelu.case = args.case
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 1)
    w = torch.nn.Parameter(torch.rand(8, 1))
    optimizer = torch.optim.SGD([*lin.parameters(), w], lr=0.01)
    worst = 0.0
    for _step in range(4):
        x = torch.randn(8, 4)
        optimizer.zero_grad()
        loss = loss_of(x, lambda v: lin(v).reshape(-1), w.reshape(-1), WarpRelu.apply, args.case)
        loss.backward()
        if args.check:
            expected = torch.autograd.grad(loss_of(x, lambda v: lin(v).reshape(-1), w.reshape(-1), torch.relu, "fresh"), w)[0]  # fmt: skip
            if args.case == "before":  # torch differentiates what it computed: h * w with h already relu'd
                h = torch.relu(lin(x).reshape(-1)).detach()
                expected = h.reshape(-1, 1)
            worst = max(worst, float((w.grad - expected).abs().max() / expected.abs().max()))
        optimizer.step()
    if args.check:
        print(f"max relative gradient difference: {worst:.3g}")
    print(f"loss {float(loss.detach()):.5f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
