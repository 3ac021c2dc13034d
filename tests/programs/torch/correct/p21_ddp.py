# DistributedDataParallel on CPU (gloo, world_size 1), with no_sync() gradient accumulation
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29517")
dist.init_process_group("gloo", rank=0, world_size=1)
torch.manual_seed(0)
model = DDP(torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(4):
    opt.zero_grad()
    for micro in range(3):
        x = torch.randn(8, 4)
        y = torch.randn(8, 1)
        if micro < 2:
            with model.no_sync():
                (torch.nn.functional.mse_loss(model(x), y) / 3).backward()
        else:
            (torch.nn.functional.mse_loss(model(x), y) / 3).backward()
    opt.step()
print("ddp ok", round(sum(p.norm().item() for p in model.parameters()), 4))
dist.destroy_process_group()
