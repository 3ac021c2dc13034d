# Minimal: a Warp Function whose backward makes everything fresh (a new tape, new arrays) and keeps the last
# adjoint it returned for logging, replacing it each backward. Correct: every torch backward gets a fresh array.
import torch
import warp as wp

wp.config.quiet = True
wp.init()


@wp.kernel
def sq(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


last = {}


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        xw = wp.from_torch(x.detach(), requires_grad=True)
        yw = wp.zeros(x.shape[0], dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(sq, dim=x.shape[0], inputs=[xw], outputs=[yw])
        tape.backward(grads={yw: wp.from_torch(g.contiguous(), requires_grad=False)})
        last.clear()  # drop the previous backward's copy
        gx = wp.empty(x.shape[0], dtype=float)  # a fresh array
        wp.copy(gx, xw.grad)
        last["gx"] = gx
        return wp.to_torch(gx)


w = torch.nn.Parameter(torch.linspace(-1, 1, 8))
opt = torch.optim.SGD([w], lr=0.1)
for step in range(30):
    opt.zero_grad()
    loss = Square.apply(w).sum()
    loss.backward()
    assert torch.allclose(w.grad, 2 * w.detach()), (w.grad, 2 * w)
    opt.step()
print("w9 grads == 2w on every step: ok")
