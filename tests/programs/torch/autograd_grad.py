"""A Warp Function checked and trained through ``torch.autograd.grad`` instead of ``loss.backward()`` (issue 43).

``--mode gradcheck`` checks the Function with ``torch.autograd.gradcheck`` (float64, as torch advises), which calls
``torch.autograd.grad`` once per Jacobian row with one-hot ``grad_outputs`` of its own; ``--mode functional`` trains
a tiny model with ``grads = torch.autograd.grad(loss, params)`` and a hand-written SGD step (no ``.grad`` at all).

``--case``:
- ``clean``: a fresh tape and arrays each forward, ``tape.zero()`` before each backward (torch may run one graph's
  backward several times: gradcheck does), Warp given a copy of ``grad_output``: correct;
- ``grad-outputs-zeroed``: the backward hands torch's ``grad_output`` itself to Warp (``y.grad =
  wp.from_torch(grad_output)``), whose backward zeroes it after reading it: the tensor the program passed as
  ``grad_outputs`` is zeroed (warp#1732), so gradcheck's later rows read zeros;
- ``not-reentrant``: no ``tape.zero()`` in the backward: a second backward over the same graph returns the sum of
  both (gradcheck's reentrancy check fails);
- ``tape-reused``: the tape and arrays are made and recorded once and reused by every forward, never zeroed: each
  backward returns the sum of all so far.
The program prints gradcheck's verdict (``--mode gradcheck``) or the loss, and ``--check`` the largest relative
difference between the Function's gradient of its input and torch's own.
"""

import argparse
import sys

import torch
import warp as wp


@wp.kernel
def scaled_tanh(x: wp.array(dtype=wp.float64), scale: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    y[i] = wp.tanh(scale[0] * x[i])


CASES = ("clean", "grad-outputs-zeroed", "not-reentrant", "tape-reused")


class WarpTanh(torch.autograd.Function):
    case = "clean"
    kept = None  # (tape, x, scale, y): tape-reused's, made by the first forward

    @staticmethod
    def forward(ctx, x, scale):
        n = x.shape[0]
        if WarpTanh.case == "tape-reused" and WarpTanh.kept is not None:
            tape, ctx.x, ctx.scale, ctx.y = WarpTanh.kept  # recorded once: run again off the tape
            wp.copy(ctx.x, wp.from_torch(x.detach().contiguous()))
            wp.copy(ctx.scale, wp.from_torch(scale.detach().contiguous()))
            wp.launch(scaled_tanh, dim=n, inputs=[ctx.x, ctx.scale], outputs=[ctx.y])
        else:
            tape = wp.Tape()
            ctx.x = wp.from_torch(x.detach().clone(), requires_grad=True)
            ctx.scale = wp.from_torch(scale.detach().clone(), requires_grad=True)
            ctx.y = wp.zeros(n, dtype=wp.float64, requires_grad=True)
            with tape:
                wp.launch(scaled_tanh, dim=n, inputs=[ctx.x, ctx.scale], outputs=[ctx.y])
            if WarpTanh.case == "tape-reused":
                WarpTanh.kept = (tape, ctx.x, ctx.scale, ctx.y)
        ctx.tape = tape
        return wp.to_torch(ctx.y).clone()

    @staticmethod
    def backward(ctx, grad_y):
        if WarpTanh.case in ("clean", "grad-outputs-zeroed"):
            ctx.tape.zero()
        given = grad_y.contiguous()
        ctx.y.grad = wp.from_torch(given if WarpTanh.case == "grad-outputs-zeroed" else given.clone())
        ctx.tape.backward()
        return wp.to_torch(ctx.x.grad).clone(), wp.to_torch(ctx.scale.grad).clone()


def reference(x, scale):
    return torch.tanh(scale * x)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("gradcheck", "functional"), default="gradcheck")
    parser.add_argument("--case", choices=CASES, default="clean")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    wp.config.quiet = True
    wp.init()
    WarpTanh.case = args.case
    torch.manual_seed(0)
    x = torch.linspace(-1.0, 1.0, 5, dtype=torch.float64, requires_grad=True)
    scale = torch.tensor([0.7], dtype=torch.float64, requires_grad=True)
    if args.check:
        seed = torch.linspace(0.5, 1.5, 5, dtype=torch.float64)
        ours = [torch.autograd.grad(WarpTanh.apply(x, scale), x, seed)[0] for _ in range(2)][-1]
        theirs = torch.autograd.grad(reference(x, scale), x, seed)[0]
        print(f"max relative gradient difference: {float((ours - theirs).abs().max() / theirs.abs().max()):.3g}")
        return 0
    if args.mode == "gradcheck":
        ok = torch.autograd.gradcheck(WarpTanh.apply, (x, scale), eps=1e-6, atol=1e-6, raise_exception=False)
        print(f"gradcheck: {ok}")
        return 0
    target = torch.sin(torch.linspace(-1.0, 1.0, 5, dtype=torch.float64))
    for _step in range(6):
        loss = ((WarpTanh.apply(x, scale) - target) ** 2).sum()
        grads = torch.autograd.grad(loss, (x, scale))
        with torch.no_grad():
            for tensor, grad in zip((x, scale), grads):
                tensor -= 0.1 * grad
    print(f"loss {float(loss):.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
