# GAN: two optimizers, detach for D step, G step backward through D (D grads cleared by next D zero_grad)
import torch

torch.manual_seed(0)
G = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
D = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.LeakyReLU(0.2), torch.nn.Linear(16, 1))
optG = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
optD = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
bce = torch.nn.BCEWithLogitsLoss()
for it in range(15):
    real = torch.randn(32, 2) * 0.5 + 2
    z = torch.randn(32, 2)
    fake = G(z)
    D.zero_grad()
    lossD = bce(D(real), torch.ones(32, 1)) + bce(D(fake.detach()), torch.zeros(32, 1))
    lossD.backward()
    optD.step()
    G.zero_grad()
    lossG = bce(D(fake), torch.ones(32, 1))
    lossG.backward()
    optG.step()
print("D", round(lossD.item(), 4), "G", round(lossG.item(), 4))
