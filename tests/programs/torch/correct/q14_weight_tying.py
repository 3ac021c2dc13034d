"""q14: a tiny language model whose token embedding and output projection share one weight (head.weight =
emb.weight), with a Warp causal running-mean mixer over time (a loop bounded by the position, t + 1, summing
into an accumulator that the output uses only linearly).

Feature: weight tying. The shared weight is one parameter (model.parameters() yields it once) and gets the sum of
both uses' gradients. The Warp Function makes fresh arrays and a fresh tape per call. Correct; ``--check``
compares with cumsum / count in torch.
"""

import sys

import torch
import warp as wp

wp.config.quiet = True
wp.init()


@wp.kernel
def causal_mean(x: wp.array3d(dtype=float), y: wp.array3d(dtype=float)):
    b, t, d = wp.tid()
    acc = wp.float32(0.0)
    for s in range(t + 1):
        acc += x[b, s, d]
    y[b, t, d] = acc / float(t + 1)


class WarpCausalMean(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        xw = wp.from_torch(x.detach().contiguous(), requires_grad=True)
        yw = wp.zeros(xw.shape, dtype=float, requires_grad=True, device=xw.device)
        tape = wp.Tape()
        with tape:
            wp.launch(causal_mean, dim=xw.shape, inputs=[xw], outputs=[yw], device=xw.device)
        ctx.tape, ctx.xw, ctx.yw = tape, xw, yw
        return wp.to_torch(yw, requires_grad=False)

    @staticmethod
    def backward(ctx, grad_y):
        ctx.tape.backward(grads={ctx.yw: wp.from_torch(grad_y.contiguous())})
        return wp.to_torch(ctx.xw.grad)


def torch_causal_mean(x):
    return x.cumsum(1) / torch.arange(1, x.shape[1] + 1, dtype=x.dtype).view(1, -1, 1)


class TinyLM(torch.nn.Module):
    def __init__(self, vocab=11, dim=8, mixer=WarpCausalMean.apply):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, dim)
        self.mix = torch.nn.Linear(dim, dim)
        self.head = torch.nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.emb.weight  # tied
        self.mixer = mixer

    def forward(self, tokens):
        e = self.emb(tokens)
        h = e + torch.tanh(self.mix(self.mixer(e)))
        return self.head(h)


def lm_loss(model, tokens):
    logits = model(tokens[:, :-1])
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


def check(model, tokens):
    ref = TinyLM(mixer=torch_causal_mean)
    ref.load_state_dict(model.state_dict())
    worst = 0.0
    for _ in range(2):
        got = torch.autograd.grad(lm_loss(model, tokens), list(model.parameters()))
        exp = torch.autograd.grad(lm_loss(ref, tokens), list(ref.parameters()))
        for g, e in zip(got, exp):
            worst = max(worst, float((g - e).abs().max() / (e.abs().max() + 1e-12)))
    print(f"q14 check: max rel grad diff vs torch {worst:.2e}")
    assert worst < 1e-4, worst


def main():
    torch.manual_seed(14)
    model = TinyLM()
    assert model.head.weight is model.emb.weight and len(list(model.parameters())) == 3
    tokens = (torch.arange(7).repeat(4, 1) * 3 + torch.arange(4).unsqueeze(1)) % 11  # (4, 7) arithmetic sequences
    if "--check" in sys.argv[1:]:
        check(model, tokens)
    opt = torch.optim.Adam(model.parameters(), lr=2e-2)
    for _ in range(10):
        opt.zero_grad()
        loss = lm_loss(model, tokens)
        loss.backward()
        opt.step()
    print("q14 tied loss", round(loss.item(), 4))
    return 0


if __name__ == "__main__":
    sys.exit(main())
