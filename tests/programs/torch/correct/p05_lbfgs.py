# LBFGS with closure; SGD with closure
import torch

torch.manual_seed(0)
w = torch.zeros(5, requires_grad=True)
A = torch.randn(20, 5)
b = torch.randn(20)
opt = torch.optim.LBFGS([w], lr=1, max_iter=20, history_size=10, line_search_fn="strong_wolfe")


def closure():
    opt.zero_grad()
    loss = ((A @ w - b) ** 2).mean()
    loss.backward()
    return loss


for i in range(3):
    l = opt.step(closure)
print("lbfgs", round(float(l), 5))
model = torch.nn.Linear(5, 1)
sgd = torch.optim.SGD(model.parameters(), lr=0.1)


def closure2():
    sgd.zero_grad()
    loss = torch.nn.functional.mse_loss(model(A).squeeze(1), b)
    loss.backward()
    return loss


for i in range(10):
    l = sgd.step(closure2)
print("sgd", round(float(l), 5))
# LBFGS on a module, closure without zero_grad inside? (the docs put zero_grad inside; keep it correct)
model2 = torch.nn.Linear(5, 1)
lb = torch.optim.LBFGS(model2.parameters(), max_iter=5)


def closure3():
    lb.zero_grad()
    l = torch.nn.functional.mse_loss(model2(A).squeeze(1), b)
    l.backward()
    return l


for i in range(4):
    l = lb.step(closure3)
print("lbfgs2", round(float(l), 5))
