# custom torch.autograd.Function (pure torch), with ctx.save_for_backward and with ctx attributes; checked by gradcheck
import torch

torch.manual_seed(0)


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x**2 * g


class ScaleShift(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, a, b):
        ctx.save_for_backward(x, a)
        return x * a + b

    @staticmethod
    def backward(ctx, g):
        x, a = ctx.saved_tensors
        return g * a, (g * x).sum(0), g.sum(0)


class SafeSqrt(torch.autograd.Function):  # non-tensor ctx attr; in-place on a fresh grad
    @staticmethod
    def forward(ctx, x, eps):
        y = torch.sqrt(x + eps)
        ctx.y = y
        return y

    @staticmethod
    def backward(ctx, g):
        out = g.clone()
        out.div_(2 * ctx.y)
        return out, None


xc = torch.randn(4, 3, dtype=torch.double, requires_grad=True)
ac = torch.randn(3, dtype=torch.double, requires_grad=True)
bc = torch.randn(3, dtype=torch.double, requires_grad=True)
print("gradcheck", torch.autograd.gradcheck(lambda x, a, b: Cube.apply(ScaleShift.apply(x, a, b)), (xc, ac, bc)))
a = torch.nn.Parameter(torch.ones(3))
b = torch.nn.Parameter(torch.zeros(3))
lin = torch.nn.Linear(3, 3)
opt = torch.optim.SGD([a, b, *lin.parameters()], lr=0.01)
x = torch.randn(16, 3)
for it in range(8):
    opt.zero_grad()
    h = Cube.apply(ScaleShift.apply(lin(x), a, b))
    loss = SafeSqrt.apply(h**2, 1e-6).mean()
    loss.backward()
    opt.step()
print("custom", round(loss.item(), 5))
