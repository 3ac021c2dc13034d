# complex128 parameter, Adam
import torch

torch.manual_seed(0)
w = torch.nn.Parameter(torch.randn(8, dtype=torch.cdouble))
target = torch.randn(8, dtype=torch.cdouble)
opt = torch.optim.Adam([w], lr=0.05)
for step in range(10):
    opt.zero_grad()
    loss = (w - target).abs().pow(2).sum()
    loss.backward()
    opt.step()
print("complex128", round(loss.item(), 4))
