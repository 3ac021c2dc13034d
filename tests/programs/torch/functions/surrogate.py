"""Pure-torch Functions whose backward is not their forward's derivative on purpose: a straight-through estimator
(round in the forward, identity in the backward) and gradient reversal (identity forward, negated backward), as
quantization-aware training and domain-adversarial training use them; and a correct pure-torch Function beside."""

import torch

torch.manual_seed(0)


class RoundSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.round(x * 4.0) / 4.0

    @staticmethod
    def backward(ctx, g):
        return g


class ReverseGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight):
        ctx.weight = weight
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return -ctx.weight * g, None


class Softplus(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.nn.functional.softplus(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.sigmoid(x)


encoder = torch.nn.Linear(6, 8)
head = torch.nn.Linear(8, 1)
critic = torch.nn.Linear(8, 1)
opt = torch.optim.Adam([*encoder.parameters(), *head.parameters(), *critic.parameters()], lr=1e-2)
x, y = torch.randn(32, 6), torch.randn(32, 1)
for step in range(5):
    opt.zero_grad()
    h = Softplus.apply(RoundSTE.apply(encoder(x)))
    loss = torch.nn.functional.mse_loss(head(h), y) + 0.1 * critic(ReverseGrad.apply(h, 0.5)).pow(2).mean()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.6f}")
