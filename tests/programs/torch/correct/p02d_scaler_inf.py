# fp16 autocast + GradScaler with its default init_scale: the first backwards overflow in fp16 (inf grads),
# scaler.step skips them and scaler.update backs the scale off: the designed behaviour of mixed precision.
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=1e-4)
scaler = torch.amp.GradScaler("cpu")
x = torch.randn(512, 8) * 4
y = torch.randn(512, 1) * 10
skipped = 0
for step in range(20):
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        out = model(x)
    loss = torch.nn.functional.mse_loss(out.float(), y, reduction="sum")
    scaler.scale(loss).backward()
    s0 = scaler.get_scale()
    scaler.step(opt)
    scaler.update()
    skipped += scaler.get_scale() < s0
print("skipped", int(skipped), "scale", scaler.get_scale(), "loss", round(loss.item(), 1))
