# sparse embedding gradients with SparseAdam + dense Adam for the rest (the torch docs' recipe)
import torch

torch.manual_seed(0)
emb = torch.nn.Embedding(50, 8, sparse=True)
head = torch.nn.Linear(8, 1)
opt_s = torch.optim.SparseAdam(list(emb.parameters()), lr=1e-2)
opt_d = torch.optim.Adam(head.parameters(), lr=1e-2)
for step in range(6):
    idx = torch.randint(0, 50, (32,))
    y = torch.randn(32, 1)
    opt_s.zero_grad()
    opt_d.zero_grad()
    loss = torch.nn.functional.mse_loss(head(emb(idx)), y)
    loss.backward()
    opt_s.step()
    opt_d.step()
print("sparse", round(loss.item(), 4))
