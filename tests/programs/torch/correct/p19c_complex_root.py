# backward from a complex scalar with an explicit gradient (torch needs one for complex outputs)
import torch

torch.manual_seed(0)
w = torch.nn.Parameter(torch.randn(4))
opt = torch.optim.SGD([w], lr=0.1)
for step in range(5):
    opt.zero_grad()
    z = (w * torch.exp(1j * torch.arange(4.0))).sum()  # complex scalar
    z.backward(gradient=torch.tensor(1 + 0j))  # d Re(z)/dw
    opt.step()
print("w", [round(v, 3) for v in w.tolist()])
