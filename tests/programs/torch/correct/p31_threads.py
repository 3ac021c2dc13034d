# two threads, each training its own model with its own optimizer (e.g. ensemble members, A3C-style workers)
import threading

import torch


def worker(seed, out):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(256, 8, generator=g)
    y = torch.randn(256, 1, generator=g)
    for step in range(300):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    out[seed] = round(loss.item(), 3)


out = {}
ts = [threading.Thread(target=worker, args=(s, out)) for s in range(2)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print("threads", sorted(out.items()))
