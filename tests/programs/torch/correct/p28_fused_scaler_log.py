# GradScaler with a fused Adam (fused=True; the scaler hands it grad_scale and the fused step unscales .grad
# in place), grad norm logged after scaler.step: it reads the true (unscaled) gradient, as with a non-fused
# optimizer (where scaler.step calls unscale_ itself). Correct.
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
x = torch.randn(64, 8)
y = torch.randn(64, 1)
for step in range(6):
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = torch.nn.functional.mse_loss(model(x).float(), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    gnorm = torch.norm(torch.stack([p.grad.norm() for p in model.parameters()]))
print("true grad norm (unscaled)", round(gnorm.item(), 4))
