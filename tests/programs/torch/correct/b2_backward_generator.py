# torch.autograd.backward accepts any iterable of tensors (it does tuple(tensors)): here a generator
import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 4)
for step in range(3):
    opt.zero_grad()
    out = model(x)
    losses = [out[:, 0].pow(2).mean(), out[:, 1].abs().mean()]
    torch.autograd.backward(l for l in losses)
    print("grad norm", round(model.weight.grad.norm().item(), 5))
    opt.step()
