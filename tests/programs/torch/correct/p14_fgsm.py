# adversarial training (FGSM / PGD): input x.requires_grad_(), x.grad read, x.grad.zero_(); model grads zeroed
import torch

torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
opt = torch.optim.SGD(net.parameters(), lr=0.05)
for it in range(6):
    x = torch.randn(16, 10)
    y = torch.randint(0, 3, (16,))
    # PGD: 3 inner steps on delta
    delta = torch.zeros_like(x, requires_grad=True)
    for k in range(3):
        l = torch.nn.functional.cross_entropy(net(x + delta), y)
        l.backward()
        with torch.no_grad():
            delta += 0.01 * delta.grad.sign()
            delta.clamp_(-0.03, 0.03)
        delta.grad.zero_()
    # FGSM on a leaf input
    xa = x.clone().requires_grad_()
    la = torch.nn.functional.cross_entropy(net(xa), y)
    la.backward()
    x_adv = (xa + 0.03 * xa.grad.sign()).detach()
    opt.zero_grad()  # clears the param grads the attack backwards left
    loss = torch.nn.functional.cross_entropy(net(x_adv), y) + torch.nn.functional.cross_entropy(
        net(x + delta.detach()), y
    )
    loss.backward()
    opt.step()
print("adv", round(loss.item(), 4))
