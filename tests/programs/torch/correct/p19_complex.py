# complex-valued parameters trained with Adam (supported by torch's optimizers)
import torch

torch.manual_seed(0)
w = torch.nn.Parameter(torch.randn(8, dtype=torch.cfloat))
target = torch.randn(8, dtype=torch.cfloat)
opt = torch.optim.Adam([w], lr=0.05)
for step in range(10):
    opt.zero_grad()
    loss = (w - target).abs().pow(2).sum()
    loss.backward()
    opt.step()
print("complex", round(loss.item(), 4))
