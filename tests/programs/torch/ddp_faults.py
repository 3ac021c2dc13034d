"""DistributedDataParallel with a Warp stage: each way replicas stop being copies of one model, and its correct twin
(issue 44, the cross-rank checks). Run on CPU with gloo, 2 ranks:

    torchrun --nproc-per-node=2 --no-python gradcheck exec --output r.json ddp_faults.py --case CASE

The model is ``Linear -> WarpGate (x * gate, a torch.autograd.Function running a Warp kernel on a Warp tape) ->
Linear``, each rank on its own shard of a synthetic regression.

Mistakes (replicas diverge):
- ``added-after``: a Warp kernel adds a penalty computed from each rank's own batch into ``wp.from_torch(w.grad)``
  after backward;
- ``grad-call``: an auxiliary loss's gradient, taken with ``torch.autograd.grad`` through ``model.module`` (no DDP
  hook runs), assigned to ``.grad`` after backward (pytorch#47562);
- ``module-forward``: the forward calls ``model.module`` (the wrapped model) instead of ``model``: DDP's hooks are
  not armed and nothing is all-reduced (jingyaogong/minimind#853);
- ``param-write``: rank 0 alone clamps a weight through ``wp.from_torch(w)`` after the step;
- ``grad-none``: rank 1 alone clears a gradient before the step (a rank-dependent freeze);
- ``bucket-replaced`` (a warning): ``gradient_as_bucket_view=True`` and ``p.grad = p.grad * 0.5`` before the step.

Correct twins (no cross-rank finding): ``clean``; ``captured`` (the Function reads the gate parameter without taking
it as an input, and Warp's tape writes its gradient through ``wp.from_torch(gate)``, which wraps ``gate.grad``: under
``find_unused_parameters=True`` DDP still all-reduces a gradient written during backward, measured on torch 2.13);
``added-after-same`` (weight decay from the weight itself, alike on every rank);
``param-write-all`` (every rank clamps); ``no-sync`` (accumulation: the first micro-batch under ``no_sync()``);
``bucket-inplace`` (``p.grad.mul_(0.5)``, the bucket view kept); ``gan`` (two DDP models, the discriminator's
backwards before the generator's, which runs forward once and is stepped on the third backward); ``zero``
(ZeroRedundancyOptimizer: each rank steps its shard inside the outer step, then broadcasts); ``uneven`` (rank 0
accumulates two micro-batches at the first step, the first under ``no_sync()``, rank 1 one: the ranks' backwards
are numbered apart from then on); ``unused`` (a parameter no rank uses, under
``find_unused_parameters=True``).

``--check`` prints, after training, the largest relative difference across ranks of every parameter (all-gathered
here, by the program itself), so a test proves each case's replicas diverge or stay equal without gradcheck.
"""

import argparse
import sys

import torch
import torch.distributed as dist
import warp as wp

CASES = (
    "clean", "captured", "grad-call", "added-after", "module-forward", "added-after-same", "param-write", "param-write-all",
    "grad-none", "no-sync", "bucket-replaced", "bucket-inplace", "unused", "gan", "zero", "uneven",
)  # fmt: skip


@wp.kernel
def gate_kernel(x: wp.array2d(dtype=wp.float32), gate: wp.array(dtype=wp.float32), y: wp.array2d(dtype=wp.float32)):
    i, j = wp.tid()
    y[i, j] = x[i, j] * gate[j]


@wp.kernel
def add_scaled(src: wp.array(dtype=wp.float32), scale: float, dst: wp.array(dtype=wp.float32)):
    i = wp.tid()
    dst[i] = dst[i] + scale * src[i]


@wp.kernel
def clamp(values: wp.array(dtype=wp.float32), bound: float):
    i = wp.tid()
    values[i] = wp.clamp(values[i], -bound, bound)


class WarpGate(torch.autograd.Function):
    """y = x * gate. ``captured`` is a parameter the Function reads without taking it as an input."""

    @staticmethod
    def forward(ctx, x, gate, captured=None):
        ctx.x = wp.from_torch(x.detach().contiguous(), requires_grad=True)
        ctx.gate = wp.from_torch(captured) if captured is not None else wp.from_torch(gate.detach(), requires_grad=True)
        ctx.y = wp.zeros(x.shape, dtype=wp.float32, requires_grad=True)
        ctx.tape = wp.Tape()
        with ctx.tape:
            wp.launch(gate_kernel, dim=x.shape, inputs=[ctx.x, ctx.gate], outputs=[ctx.y])
        ctx.captured = captured is not None
        return wp.to_torch(ctx.y).clone()

    @staticmethod
    def backward(ctx, grad):
        ctx.y.grad = wp.from_torch(grad.contiguous().clone())
        ctx.tape.backward()
        grad_gate = None if ctx.captured else wp.to_torch(ctx.gate.grad).clone()
        return wp.to_torch(ctx.x.grad).clone(), grad_gate, None


class Net(torch.nn.Module):
    def __init__(self, case: str):
        super().__init__()
        self.case = case
        self.inp = torch.nn.Linear(4, 8)
        self.gate = torch.nn.Parameter(torch.linspace(0.5, 1.5, 8))
        self.out = torch.nn.Linear(8, 1)
        if case == "unused":
            self.spare = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = torch.tanh(self.inp(x))
        if self.case == "captured":
            h = WarpGate.apply(h, None, self.gate)
        else:
            h = WarpGate.apply(h, self.gate)
        return self.out(h)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", choices=CASES, default="clean")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    case = args.case
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    wp.config.quiet = True
    wp.init()
    torch.manual_seed(0)
    if case == "gan":
        return _gan(args, rank, world)
    net = Net(case)
    model = torch.nn.parallel.DistributedDataParallel(
        net, find_unused_parameters=case in ("captured", "unused"),
        gradient_as_bucket_view=case.startswith("bucket"),
    )  # fmt: skip
    if case == "zero":  # each rank steps its shard of the parameters, then broadcasts it
        from torch.distributed.optim import ZeroRedundancyOptimizer

        optimizer = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.SGD, lr=0.05)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    generator = torch.Generator().manual_seed(100 + rank)
    for _step in range(args.steps):
        optimizer.zero_grad()
        x = torch.randn(16, 4, generator=generator)
        target = x.sum(1, keepdim=True).sin()
        if case == "uneven" and _step == 0 and rank == 0:
            with model.no_sync():
                torch.nn.functional.mse_loss(model(x[:8]), target[:8]).backward()
            torch.nn.functional.mse_loss(model(x[8:]), target[8:]).backward()
        elif case == "no-sync":
            with model.no_sync():
                torch.nn.functional.mse_loss(model(x[:8]), target[:8]).backward()
            torch.nn.functional.mse_loss(model(x[8:]), target[8:]).backward()
        else:
            forward = model.module if case == "module-forward" else model
            torch.nn.functional.mse_loss(forward(x), target).backward()
        _between(case, net, x, rank)
        optimizer.step()
        if case == "param-write" and rank == 0 or case == "param-write-all":
            wp.launch(clamp, dim=net.out.weight.numel(), inputs=[wp.from_torch(net.out.weight.data.view(-1)), 0.05])
    if args.check:
        print(f"rank {rank} worst {_spread(net, world):.3g}")
    dist.barrier()
    dist.destroy_process_group()
    return 0


def _between(case: str, net: Net, x, rank: int) -> None:
    """What the case does between backward and the optimizer step."""
    weight = net.out.weight
    if case == "grad-call":  # an auxiliary loss on this rank's batch, through the module DDP wraps
        aux = net(x).abs().mean()
        weight.grad = weight.grad + 0.1 * torch.autograd.grad(aux, weight)[0]
    elif case == "added-after":  # a penalty from this rank's batch, added to the reduced gradient
        penalty = x.abs().mean(0).repeat(2)[: weight.numel()].contiguous()
        penalised = wp.from_torch(weight.grad.view(-1))
        wp.launch(add_scaled, dim=weight.numel(), inputs=[wp.from_torch(penalty), 0.1], outputs=[penalised])
    elif case == "added-after-same":  # weight decay: the same on every rank
        grad = wp.from_torch(weight.grad.view(-1))
        wp.launch(
            add_scaled, dim=weight.numel(), inputs=[wp.from_torch(weight.detach().view(-1)), 0.01], outputs=[grad]
        )
    elif case == "grad-none" and rank == 1:
        net.inp.bias.grad = None
    elif case == "bucket-replaced":
        weight.grad = weight.grad * 0.5
    elif case == "bucket-inplace":
        weight.grad.mul_(0.5)


def _gan(args, rank: int, world: int) -> int:
    """A GAN step as torch's DCGAN example writes it, both models under DDP: D on real, D on fake.detach(), D
    steps; then G's loss through D, G steps. G's forward runs before two backwards that never reach it."""
    generator_net = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.Tanh(), torch.nn.Linear(8, 4))
    discriminator_net = Net("clean")
    generator = torch.nn.parallel.DistributedDataParallel(generator_net)
    discriminator = torch.nn.parallel.DistributedDataParallel(discriminator_net)
    opt_g = torch.optim.Adam(generator.parameters(), lr=1e-3)
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=1e-3)
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    source = torch.Generator().manual_seed(200 + rank)
    for _step in range(args.steps):
        real = torch.randn(16, 4, generator=source) * 0.5 + 1.0
        opt_d.zero_grad()
        bce(discriminator(real), torch.ones(16, 1)).backward()
        fake = generator(torch.randn(16, 2, generator=source))
        bce(discriminator(fake.detach()), torch.zeros(16, 1)).backward()
        opt_d.step()
        opt_g.zero_grad()
        bce(discriminator(fake), torch.ones(16, 1)).backward()
        opt_g.step()
    if args.check:
        worst = max(_spread(generator_net, world), _spread(discriminator_net, world))
        print(f"rank {rank} worst {worst:.3g}")
    dist.barrier()
    dist.destroy_process_group()
    return 0


def _spread(net: Net, world: int) -> float:
    """The largest relative difference of any parameter across the ranks (all-gathered: the program's own check)."""
    worst = 0.0
    for p in net.parameters():
        gathered = [torch.zeros_like(p) for _ in range(world)]
        dist.all_gather(gathered, p.detach().contiguous())
        scale = max(float(g.abs().max()) for g in gathered) or 1.0
        worst = max(worst, max(float((g - gathered[0]).abs().max()) / scale for g in gathered))
    return worst


if __name__ == "__main__":
    sys.exit(main())
