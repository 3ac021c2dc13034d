# A line fit through a Warp kernel (a torch.autograd.Function around a tape) whose bias trains to its optimum: from
# d loss / d b = -1 at the first backward to ~1e-9 against a loss of ~0.01 at the end, where the bias sits. A gradient
# that shrinks as the loss reaches its minimum: no vanishing warning (issue 39: it warned on this, judging the last
# gradient against the largest loss).
import torch
import warp as wp

wp.config.quiet = True
wp.init()


@wp.kernel
def affine(x: wp.array(dtype=float), w: wp.array(dtype=float), b: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = w[0] * x[i] + b[0]


class Affine(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b):
        ctx.tape = wp.Tape()
        ctx.w, ctx.b = wp.from_torch(w, requires_grad=True), wp.from_torch(b, requires_grad=True)
        ctx.y = wp.zeros(x.shape[0], requires_grad=True, device="cpu")
        with ctx.tape:
            wp.launch(affine, dim=x.shape[0], inputs=[wp.from_torch(x), ctx.w, ctx.b], outputs=[ctx.y])
        return wp.to_torch(ctx.y).clone()

    @staticmethod
    def backward(ctx, grad_y):
        ctx.y.grad = wp.from_torch(grad_y.contiguous().clone())  # Warp's backward consumes it: torch's stays whole
        ctx.tape.backward()
        grads = wp.to_torch(ctx.w.grad).clone(), wp.to_torch(ctx.b.grad).clone()
        ctx.tape.zero()
        return None, *grads


torch.manual_seed(0)
x = torch.linspace(-1, 1, 64)
noise = torch.randn(64) * 0.1
target = 3.0 * x + 0.5 + noise - noise.mean()  # the best bias is 0.5; b starts at 0
w, b = torch.nn.Parameter(torch.zeros(1)), torch.nn.Parameter(torch.zeros(1))
opt = torch.optim.SGD([w, b], lr=0.5)
for _ in range(60):
    opt.zero_grad()
    loss = ((Affine.apply(x, w, b) - target) ** 2).mean()
    loss.backward()
    opt.step()
print("bias-at-optimum", round(loss.item(), 4), round(w.item(), 3))
