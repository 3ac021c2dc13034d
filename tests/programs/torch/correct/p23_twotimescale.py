# two timescales: the head's optimizer steps every micro-batch; the backbone's optimizer accumulates over 4
# micro-batches and steps (then zeroes) once per 4. Each optimizer zeroes exactly what it steps.
import torch

torch.manual_seed(0)
backbone = torch.nn.Linear(4, 16)
head = torch.nn.Linear(16, 1)
opt_head = torch.optim.SGD(head.parameters(), lr=0.05)
opt_bb = torch.optim.SGD(backbone.parameters(), lr=0.01)
for i in range(16):
    x = torch.randn(8, 4)
    y = torch.randn(8, 1)
    opt_head.zero_grad()
    loss = torch.nn.functional.mse_loss(head(torch.relu(backbone(x))), y)
    loss.backward()
    opt_head.step()
    if (i + 1) % 4 == 0:
        opt_bb.step()
        opt_bb.zero_grad()
print("two-timescale", round(loss.item(), 4))
