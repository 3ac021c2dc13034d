"""q17: an encoder (Linear, then a Warp layer q = tanh(M v) on wp.vec3 / wp.mat33 arrays with a learned 3x3 M) and
a head, each with its own optimizer (Adam for the encoder, SGD for the head); both zero_grad() and step() every
iteration.

Feature: two optimizers over disjoint parameter sets. The Warp Function wraps (B, 3) as vec3 and (3, 3) as a
one-element mat33 array, fresh per call, and returns Warp's adjoints. Correct; ``--check`` compares with
tanh(v @ M.T) in torch.
"""

import sys

import torch
import warp as wp

wp.config.quiet = True
wp.init()


@wp.kernel
def mat_tanh(v: wp.array(dtype=wp.vec3), m: wp.array(dtype=wp.mat33), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    q = m[0] * v[i]
    out[i] = wp.vec3(wp.tanh(q[0]), wp.tanh(q[1]), wp.tanh(q[2]))


class WarpMatTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, v, m):
        vw = wp.from_torch(v.detach().contiguous(), dtype=wp.vec3, requires_grad=True)
        mw = wp.from_torch(m.detach().reshape(1, 3, 3).contiguous(), dtype=wp.mat33, requires_grad=True)
        ow = wp.zeros(vw.shape, dtype=wp.vec3, requires_grad=True, device=vw.device)
        tape = wp.Tape()
        with tape:
            wp.launch(mat_tanh, dim=vw.shape, inputs=[vw, mw], outputs=[ow], device=vw.device)
        ctx.tape, ctx.vw, ctx.mw, ctx.ow = tape, vw, mw, ow
        return wp.to_torch(ow, requires_grad=False)

    @staticmethod
    def backward(ctx, grad_out):
        ctx.tape.backward(grads={ctx.ow: wp.from_torch(grad_out.contiguous(), dtype=wp.vec3)})
        return wp.to_torch(ctx.vw.grad), wp.to_torch(ctx.mw.grad).reshape(3, 3)


class Encoder(torch.nn.Module):
    def __init__(self, use_warp=True):
        super().__init__()
        self.lin = torch.nn.Linear(5, 3)
        self.m = torch.nn.Parameter(torch.eye(3) + 0.1 * torch.randn(3, 3))
        self.use_warp = use_warp

    def forward(self, x):
        v = self.lin(x)
        return WarpMatTanh.apply(v, self.m) if self.use_warp else torch.tanh(v @ self.m.T)


def check(enc, head, x, y):
    ref = Encoder(use_warp=False)
    ref.load_state_dict(enc.state_dict())
    params = list(enc.parameters()) + list(head.parameters())
    rparams = list(ref.parameters()) + list(head.parameters())
    worst = 0.0
    for _ in range(2):
        got = torch.autograd.grad(torch.nn.functional.mse_loss(head(enc(x)), y), params)
        exp = torch.autograd.grad(torch.nn.functional.mse_loss(head(ref(x)), y), rparams)
        for g, e in zip(got, exp):
            worst = max(worst, float((g - e).abs().max() / (e.abs().max() + 1e-12)))
    print(f"q17 check: max rel grad diff vs torch {worst:.2e}")
    assert worst < 1e-4, worst


def main():
    torch.manual_seed(17)
    encoder, head = Encoder(), torch.nn.Linear(3, 1)
    x = torch.randn(24, 5)
    y = (x[:, :1] * x[:, 1:2]).tanh()
    if "--check" in sys.argv[1:]:
        check(encoder, head, x, y)
    opt_enc = torch.optim.Adam(encoder.parameters(), lr=1e-2)
    opt_head = torch.optim.SGD(head.parameters(), lr=0.1)
    for _ in range(10):
        opt_enc.zero_grad()
        opt_head.zero_grad()
        loss = torch.nn.functional.mse_loss(head(encoder(x)), y)
        loss.backward()
        opt_enc.step()
        opt_head.step()
    print("q17 two-optimizers loss", round(loss.item(), 5))
    return 0


if __name__ == "__main__":
    sys.exit(main())
