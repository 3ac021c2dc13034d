# a module overriding named_parameters with the pre-1.13 signature (no remove_duplicate), as older libraries do
import torch


class Wrapped(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Linear(4, 1)

    def named_parameters(self, prefix="", recurse=True):
        return super().named_parameters(prefix=prefix, recurse=recurse)

    def forward(self, x):
        return self.inner(x)


torch.manual_seed(0)
model = Wrapped()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(16, 4)
y = x.sum(1, keepdim=True)
for step in range(5):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
print("loss", round(loss.item(), 4))
