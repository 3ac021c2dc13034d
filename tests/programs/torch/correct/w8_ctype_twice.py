# return_ctype=True descriptors in forward; the same Function applied twice in one graph (y = F(F(x)))
import torch
import warp as wp
import wcommon
from wcommon import fwd, torch_twin, train


class F(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        y = torch.empty_like(x)
        wp.launch(
            fwd,
            dim=x.shape[0],
            inputs=[wp.from_torch(x.detach(), return_ctype=True), wp.from_torch(w.detach(), return_ctype=True)],
            outputs=[wp.from_torch(y, return_ctype=True)],
            device="cpu",
        )
        return y

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        xw = wp.from_torch(x.detach(), requires_grad=True)
        ww = wp.from_torch(w.detach(), requires_grad=True)
        yw = wp.zeros(x.shape[0], dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(fwd, dim=x.shape[0], inputs=[xw, ww], outputs=[yw])
        tape.backward(grads={yw: wp.from_torch(g.contiguous(), requires_grad=False)})
        return wp.to_torch(xw.grad), wp.to_torch(ww.grad)


def twice(x, w):
    return F.apply(torch.tanh(F.apply(x, w)), w)


def twice_ref(x, w):
    return torch_twin(torch.tanh(torch_twin(x, w)), w)


wcommon.torch_twin = twice_ref
worst, loss = train(twice)
print("w8 max rel grad diff vs torch", f"{worst:.2e}", "ok" if worst < 1e-5 else "WRONG")
