# torch.compile (aot_eager backend: the backward runs as a compiled autograd.Function)
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.GELU(), torch.nn.Linear(16, 1))
cmodel = torch.compile(model, backend="aot_eager")
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
x = torch.randn(32, 4)
y = x.sum(1, keepdim=True)
for step in range(6):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(cmodel(x), y)
    loss.backward()
    opt.step()
print("compiled", round(loss.item(), 4))
