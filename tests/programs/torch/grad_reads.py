"""Reads of a gradient an optimizer step rewrote in place, the ways real training loops make them (issue 43).

A small network with a Warp stage (a ``torch.autograd.Function`` whose forward and backward are Warp kernels on a
tape) is trained by an optimizer in the ScheduleFree-AdamW style: its ``step()`` rewrites ``p.grad`` in place
(``grad.div_(denom)``, ``grad.add_(p, alpha=wd)``) before using it. The loop then reads the gradient one way
(``--read``), after the step (``--when after``: the mistake, a read of the rewritten buffer) or before it
(``--when before``: the clean twin, the gradient backward produced).

Reads: ``clip-inf`` and ``clip-2`` (``torch.nn.utils.clip_grad_norm_`` with an infinite and a 2-norm, as a logging
call), ``total-norm`` (``torch.nn.utils.get_total_norm``), ``foreach-norm`` (``torch._foreach_norm``), ``vector-norm``
(``torch.linalg.vector_norm`` of the concatenated gradients), ``item-stat`` (``.item()`` of a statistic),
``data-norm`` (``p.grad.data.norm()``), ``histogram`` (TensorBoard's ``SummaryWriter.add_histogram``, when the
tensorboard package is installed), ``own-update`` (a hand-written extra update ``p.data.add_(p.grad, ...)``).
Reads that must stay silent after the step too: ``clone-unread`` (a copy taken and never read), ``zeroed`` (the
program zeroes ``.grad`` itself, then reads its own buffer), ``none`` (no read at all).
"""

import argparse
import sys
import tempfile

import torch
import warp as wp

READS = ("clip-inf", "clip-2", "total-norm", "foreach-norm", "vector-norm", "item-stat", "data-norm", "histogram",
         "own-update", "clone-unread", "zeroed", "none")  # fmt: skip


@wp.kernel
def scaled_tanh(x: wp.array(dtype=wp.float32), scale: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = wp.tanh(scale[0] * x[i])


class WarpScaledTanh(torch.autograd.Function):
    """y = tanh(scale * x), forward and backward by Warp (a fresh tape and arrays each call: correct)."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.x = wp.from_torch(x.detach().contiguous().reshape(-1), requires_grad=True)
        ctx.scale = wp.from_torch(scale.detach().clone(), requires_grad=True)
        ctx.y = wp.zeros(ctx.x.shape[0], dtype=wp.float32, requires_grad=True)
        ctx.shape = x.shape
        ctx.tape = wp.Tape()
        with ctx.tape:
            wp.launch(scaled_tanh, dim=ctx.x.shape[0], inputs=[ctx.x, ctx.scale], outputs=[ctx.y])
        return wp.to_torch(ctx.y).clone().reshape(ctx.shape)

    @staticmethod
    def backward(ctx, grad_y):
        ctx.y.grad = wp.from_torch(grad_y.contiguous().reshape(-1).clone())
        ctx.tape.backward()
        return wp.to_torch(ctx.x.grad).clone().reshape(ctx.shape), wp.to_torch(ctx.scale.grad).clone()


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Linear(4, 8)
        self.scale = torch.nn.Parameter(torch.ones(1))
        self.head = torch.nn.Linear(8, 1)

    def forward(self, x):
        return self.head(WarpScaledTanh.apply(self.encoder(x), self.scale))


class RewritingAdamW(torch.optim.Optimizer):
    """Adam-like, keeping its scaled update in ``.grad`` (as ScheduleFree-AdamW's reference code does)."""

    def __init__(self, params, lr=0.01, weight_decay=0.01):
        super().__init__(params, {"lr": lr, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "v" not in state:
                    state["v"] = torch.zeros_like(p)
                state["v"].mul_(0.99).addcmul_(p.grad, p.grad, value=0.01)
                grad = p.grad
                grad.div_(state["v"].sqrt().add_(1e-8))
                grad.add_(p, alpha=group["weight_decay"])
                p.add_(grad, alpha=-group["lr"])


def read(how: str, model: torch.nn.Module, logdir: str) -> float:
    """The gradient as the loop reads it; the number it logs."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    if how == "clip-inf":
        return float(torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf")))
    if how == "clip-2":
        return float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1e9))
    if how == "total-norm":
        return float(torch.nn.utils.get_total_norm(grads))
    if how == "foreach-norm":
        return float(torch.stack(torch._foreach_norm(grads)).square().sum().sqrt())
    if how == "vector-norm":
        return float(torch.linalg.vector_norm(torch.cat([g.reshape(-1) for g in grads])))
    if how == "item-stat":
        return model.encoder.weight.grad.abs().mean().item()
    if how == "data-norm":
        return sum(float(p.grad.data.norm(2)) ** 2 for p in model.parameters()) ** 0.5
    if how == "histogram":
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(log_dir=logdir)
        writer.add_histogram("grad/encoder.weight", model.encoder.weight.grad, 0)
        writer.close()
        return 0.0
    if how == "own-update":
        with torch.no_grad():
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-1e-4)
        return 0.0
    if how == "clone-unread":
        read.kept = [g.clone() for g in grads]
        return 0.0
    if how == "zeroed":
        for g in grads:
            g.zero_()
        return float(torch.stack([g.norm() for g in grads]).sum())
    return 0.0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--read", choices=READS, default="clip-inf")
    parser.add_argument("--when", choices=("before", "after"), default="after")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    wp.config.quiet = True
    wp.init()
    torch.manual_seed(0)
    model = Net()
    optimizer = RewritingAdamW(model.parameters())
    logged = 0.0
    with tempfile.TemporaryDirectory() as logdir:
        for _step in range(args.steps):
            x = torch.randn(16, 4)
            target = x.sum(1, keepdim=True).sin()
            optimizer.zero_grad()
            loss = ((model(x) - target) ** 2).mean()
            loss.backward()
            if args.when == "before":
                logged = read(args.read, model, logdir)
            optimizer.step()
            if args.when == "after":
                logged = read(args.read, model, logdir)
    print(f"loss {float(loss.detach()):.5f} logged {logged:.4g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
