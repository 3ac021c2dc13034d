# GradScaler with its defaults (init_scale 65536), a sum-reduced loss: true grad norm ~ 50, scaled ~ 3e6. Correct use.
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=1e-4)
scaler = torch.amp.GradScaler("cpu")
x = torch.randn(256, 8)
y = torch.randn(256, 1) * 3
for step in range(10):
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = torch.nn.functional.mse_loss(model(x).float(), y, reduction="sum")
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    true_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)
    scaler.step(opt)
    scaler.update()
print("true grad norm", round(float(true_norm), 2), "scale", scaler.get_scale())
