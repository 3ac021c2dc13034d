# A TorchFunctionMode of the program's (torch.device("meta") here) entered BEFORE an optimizer step that rewrites
# .grad in place (torch's own SGD foreach+nesterov) and exited right after it. Under plain python the device
# context ends with the `with`; the tensors made after it are on cpu.
import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9, nesterov=True, foreach=True)
x = torch.randn(8, 4)
y = torch.randn(8, 1)
for step in range(3):
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    with torch.device("meta"):
        scratch = torch.empty(2)  # meta scratch inside the block
        opt.step()
after = torch.zeros(3)
print("device after the with-block:", after.device)
print("value:", after.tolist())
