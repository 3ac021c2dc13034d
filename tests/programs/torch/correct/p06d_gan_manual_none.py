# GAN with D's grads set to None by hand (p.grad = None, the perf-guide idiom) at the start of D's step: correct
import torch

torch.manual_seed(0)
G = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
D = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.LeakyReLU(0.2), torch.nn.Linear(16, 1))
optG = torch.optim.SGD(G.parameters(), lr=1e-2)
optD = torch.optim.SGD(D.parameters(), lr=1e-2)
bce = torch.nn.BCEWithLogitsLoss()


def zero(m):
    for p in m.parameters():
        if p.grad is not None:
            p.grad = None


for it in range(10):
    real = torch.randn(32, 2) * 0.5 + 2
    fake = G(torch.randn(32, 2))
    zero(D)
    lossD = bce(D(real), torch.ones(32, 1)) + bce(D(fake.detach()), torch.zeros(32, 1))
    lossD.backward()
    optD.step()
    zero(G)
    lossG = bce(D(fake), torch.ones(32, 1))
    lossG.backward()
    optG.step()
print("D", round(lossD.item(), 4), "G", round(lossG.item(), 4))
