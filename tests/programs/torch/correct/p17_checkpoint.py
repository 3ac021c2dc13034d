# activation checkpointing: use_reentrant=True (runs torch.autograd.backward inside the outer backward) and False
import torch
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(8, 8)
        self.l2 = torch.nn.Linear(8, 8)

    def forward(self, x):
        return x + self.l2(torch.tanh(self.l1(x)))


for reentrant in (True, False):
    torch.manual_seed(0)
    blocks = torch.nn.ModuleList([Block() for _ in range(3)])
    opt = torch.optim.SGD(blocks.parameters(), lr=0.05)
    x = torch.randn(16, 8, requires_grad=reentrant)  # reentrant checkpoint needs an input that requires grad
    for step in range(5):
        opt.zero_grad()
        h = x
        for b in blocks:
            h = checkpoint(b, h, use_reentrant=reentrant)
        loss = h.pow(2).mean()
        loss.backward()
        opt.step()
    print("reentrant", reentrant, round(loss.item(), 5))
