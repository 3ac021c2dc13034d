"""A pure-PyTorch training loop (no Warp), right and wrong: ``--case NAME`` (see CASES).

``--check`` proves each mistake against a correct computation: before every optimizer step it compares the
gradients the loop holds with the gradients the same micro-steps give from a fresh copy of the model, and prints
the largest relative difference seen (0 on the correct cases).
"""

import argparse
import copy
import sys

import torch

CASES = (
    "clean", "no-zero-grad", "accumulate", "missed-boundary", "unused-in-optimizer", "frozen-aux", "nan", "explode",
    "detached", "read-after-step",
)  # fmt: skip


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Linear(4, 8)
        self.head = torch.nn.Linear(8, 1)
        self.aux = torch.nn.Linear(8, 1)  # an auxiliary head the loss never uses

    def forward(self, x, detach=False):
        h = torch.tanh(self.encoder(x))
        return self.head(h.detach() if detach else h)


class ScaledSGD(torch.optim.SGD):
    """Leaves lr * grad in .grad after its step, as optimizers that keep state in the gradient buffer do."""

    @torch.no_grad()
    def step(self, closure=None):
        super().step(closure)
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.grad.mul_(group["lr"])


def batch(step):
    g = torch.Generator().manual_seed(step % 3)
    x = torch.randn(16, 4, generator=g)
    return x, x.sum(1, keepdim=True).sin()


def loss_of(model, step, case, wrong, accumulate):
    x, target = batch(step)
    out = model(x, detach=case == "detached" and wrong)
    if case == "nan" and wrong:
        out = out * float("nan")
    if case == "explode" and wrong:
        out = out * 1e12
    return torch.nn.functional.mse_loss(out, target) / accumulate


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", default="clean", choices=CASES)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--from-step", type=int, default=0, help="the mistake starts at this step")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Net()
    case = args.case
    if case != "frozen-aux" and case != "unused-in-optimizer":
        model.aux.requires_grad_(False)
    params = [p for n, p in model.named_parameters() if case == "unused-in-optimizer" or not n.startswith("aux")]
    optimizer = (ScaledSGD if case == "read-after-step" else torch.optim.SGD)(params, lr=0.05)
    accumulate = 3 if case in ("accumulate", "missed-boundary") else 1
    reference, worst = None, 0.0
    for step in range(args.steps):
        wrong = step >= args.from_step
        if args.check:
            fresh = copy.deepcopy(model)
            fresh.zero_grad(set_to_none=True)
            loss_of(fresh, step, case, False, accumulate).backward()
            grads = {n: p.grad for n, p in fresh.named_parameters() if p.grad is not None}
            reference = grads if reference is None else {n: reference[n] + g for n, g in grads.items()}
        loss = loss_of(model, step, case, wrong, accumulate)
        loss.backward()
        if (step + 1) % accumulate:
            continue
        if args.check:
            for n, p in model.named_parameters():
                if n in reference and p.grad is not None:
                    worst = max(worst, float((p.grad - reference[n]).abs().max() / reference[n].abs().max()))
            reference = None
        optimizer.step()
        if case == "read-after-step" and wrong:
            norm = sum(float(p.grad.norm()) ** 2 for p in params) ** 0.5
            print(f"step {step}: grad norm {norm:.4g}")
        if case == "no-zero-grad" and wrong:
            continue
        if case == "missed-boundary" and wrong and (step + 1) % (2 * accumulate):
            continue
        optimizer.zero_grad()
    if args.check:
        print(f"max relative gradient difference: {worst:.3g}")
    print(f"loss {float(loss.detach()):.5f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
