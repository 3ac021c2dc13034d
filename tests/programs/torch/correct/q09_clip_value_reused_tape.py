"""q09: a Warp layer y = amp * sin(freq * x) whose tape is recorded once (first call) and whose arrays are reused:
later forwards copy new values in and launch again outside the tape (the recorded launch reads the same arrays);
backward calls tape.zero() before tape.backward, and returns .clone()s of the persistent adjoints.

Feature: gradient clipping by value, torch.nn.utils.clip_grad_value_(clip_value=0.05), before optimizer.step().
Correct: tape.zero() clears every adjoint the tape wrote at its previous backward before this one runs.
"""

import sys

import torch
import warp as wp

wp.config.quiet = True
wp.init()


@wp.kernel
def sine_layer(
    x: wp.array2d(dtype=float), freq: wp.array(dtype=float), amp: wp.array(dtype=float), y: wp.array2d(dtype=float)
):
    i, j = wp.tid()
    y[i, j] = amp[j] * wp.sin(freq[j] * x[i, j])


class SineState:
    def __init__(self, batch, width):
        self.x = wp.zeros((batch, width), dtype=float, requires_grad=True, device="cpu")
        self.freq = wp.zeros(width, dtype=float, requires_grad=True, device="cpu")
        self.amp = wp.zeros(width, dtype=float, requires_grad=True, device="cpu")
        self.y = wp.zeros((batch, width), dtype=float, requires_grad=True, device="cpu")
        self.tape = None

    def run(self):
        wp.launch(sine_layer, dim=self.y.shape, inputs=[self.x, self.freq, self.amp], outputs=[self.y], device="cpu")


class WarpSine(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, freq, amp, state):
        for dst, src in ((state.x, x), (state.freq, freq), (state.amp, amp)):
            wp.copy(dst, wp.from_torch(src.detach().contiguous(), requires_grad=False))
        if state.tape is None:
            state.tape = wp.Tape()
            with state.tape:
                state.run()
        else:
            state.run()  # the launch the tape recorded, on the same arrays
        ctx.state = state
        return wp.to_torch(state.y, requires_grad=False).clone()

    @staticmethod
    def backward(ctx, grad_y):
        s = ctx.state
        s.tape.zero()
        s.tape.backward(grads={s.y: wp.from_torch(grad_y.contiguous())})
        return wp.to_torch(s.x.grad).clone(), wp.to_torch(s.freq.grad).clone(), wp.to_torch(s.amp.grad).clone(), None


class SineNet(torch.nn.Module):
    def __init__(self, batch, width=8, use_warp=True):
        super().__init__()
        self.inp = torch.nn.Linear(2, width)
        self.freq = torch.nn.Parameter(torch.linspace(0.5, 2.0, width))
        self.amp = torch.nn.Parameter(torch.ones(width))
        self.out = torch.nn.Linear(width, 1)
        self.state = SineState(batch, width) if use_warp else None

    def forward(self, x):
        h = self.inp(x)
        if self.state is not None:
            h = WarpSine.apply(h, self.freq, self.amp, self.state)
        else:
            h = self.amp * torch.sin(self.freq * h)
        return self.out(h)


def check(model, x, y):
    ref = SineNet(x.shape[0], use_warp=False)
    ref.load_state_dict(model.state_dict())
    worst = 0.0
    for _ in range(3):
        got = torch.autograd.grad(torch.nn.functional.mse_loss(model(x), y), list(model.parameters()))
        exp = torch.autograd.grad(torch.nn.functional.mse_loss(ref(x), y), list(ref.parameters()))
        for g, e in zip(got, exp):
            worst = max(worst, float((g - e).abs().max() / (e.abs().max() + 1e-12)))
    print(f"q09 check: max rel grad diff vs torch {worst:.2e}")
    assert worst < 1e-4, worst


def main():
    torch.manual_seed(9)
    x = torch.rand(20, 2) * 2 - 1
    y = torch.sin(3 * x[:, :1]) * x[:, 1:]
    model = SineNet(batch=20)
    if "--check" in sys.argv[1:]:
        check(model, x, y)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
    for _ in range(10):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_value_(model.parameters(), clip_value=0.05)
        opt.step()
    print(
        "q09 clip-value loss",
        round(loss.item(), 5),
        "max |grad|",
        round(max(p.grad.abs().max().item() for p in model.parameters()), 4),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
