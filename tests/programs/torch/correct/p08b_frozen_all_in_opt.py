# frozen backbone, optimizer built from model.parameters() (common: frozen params have .grad None, torch skips them)
import torch

torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
for p in net[0].parameters():
    p.requires_grad = False
opt = torch.optim.SGD(net.parameters(), lr=1e-2)
x = torch.randn(32, 4)
y = torch.randint(0, 2, (32,))
for step in range(8):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(net(x), y)
    loss.backward()
    opt.step()
print("b", round(loss.item(), 4))
