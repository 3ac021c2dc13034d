"""A DistributedDataParallel training loop with a Warp stage, for torchrun on CPU (gloo): issue 44.

    torchrun --nproc-per-node=2 --no-python gradcheck exec --output r.json ddp_train.py [--steps N]

Each rank trains ``Linear -> WarpSoftplus (a torch.autograd.Function whose forward and backward run Warp kernels
on a Warp tape) -> Linear`` on its own shard of a synthetic regression, DDP averaging the gradients. ``--fail-rank R``
makes rank R raise at step 2 (a crashing rank; ``--fail-at -1``: before it joins the process group), in every
attempt unless ``--fail-once DIR`` names a directory where it marks that it already failed (an elastic restart then
completes). ``--status N`` ends every rank with
``sys.exit(N)`` after training; ``--no-zero-grad`` is a mistake gradcheck reports (gradients add up across steps).
Prints each rank's final loss.
"""

import argparse
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import warp as wp


@wp.kernel
def softplus(x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = wp.log(1.0 + wp.exp(x[i]))


class WarpSoftplus(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        flat = x.detach().reshape(-1).contiguous()
        ctx.x = wp.from_torch(flat, requires_grad=True)
        ctx.y = wp.zeros(flat.shape[0], dtype=wp.float32, requires_grad=True)
        ctx.tape = wp.Tape()
        with ctx.tape:
            wp.launch(softplus, dim=flat.shape[0], inputs=[ctx.x], outputs=[ctx.y])
        ctx.shape = x.shape
        return wp.to_torch(ctx.y).clone().reshape(x.shape)

    @staticmethod
    def backward(ctx, grad):
        ctx.y.grad = wp.from_torch(grad.reshape(-1).contiguous().clone())
        ctx.tape.backward()
        return wp.to_torch(ctx.x.grad).clone().reshape(ctx.shape)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = torch.nn.Linear(4, 16)
        self.out = torch.nn.Linear(16, 1)

    def forward(self, x):
        return self.out(WarpSoftplus.apply(self.inp(x)))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--fail-rank", type=int, default=None)
    parser.add_argument("--fail-once", type=Path, default=None)
    parser.add_argument("--fail-at", type=int, default=2, help="the step the failing rank fails at (-1: at start)")
    parser.add_argument("--status", type=int, default=0)
    parser.add_argument("--no-zero-grad", action="store_true", help="a mistake: gradients add up across steps")
    args = parser.parse_args()
    rank = int(os.environ["RANK"])
    if args.fail_at < 0 and rank == args.fail_rank and _fails(args.fail_once, rank):
        raise RuntimeError(f"rank {rank}: a failure before joining the process group")
    dist.init_process_group("gloo")
    wp.config.quiet = True
    wp.init()
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(Net())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    generator = torch.Generator().manual_seed(100 + rank)
    loss = torch.zeros(())
    for step in range(args.steps):
        if step == args.fail_at and rank == args.fail_rank and _fails(args.fail_once, rank):
            raise RuntimeError(f"rank {rank}: a failure at step {step}")
        x = torch.randn(32, 4, generator=generator)
        target = x.sum(1, keepdim=True).sin()
        if not args.no_zero_grad:
            optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        optimizer.step()
    print(f"rank {rank} restart {os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}: loss {float(loss.detach()):.5f}")
    dist.barrier()  # without it gloo aborts at exit in about one run of three ("terminate called without an active
    # exception", torchrun alone, torch 2.13)
    dist.destroy_process_group()
    return args.status


def _fails(once: Path | None, rank: int) -> bool:
    if once is None:
        return True
    mark = once / f"failed.{rank}"
    if mark.exists():
        return False
    mark.touch()
    return True


if __name__ == "__main__":
    sys.exit(main())
