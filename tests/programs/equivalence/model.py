"""The model code both halves of the equivalence corpus share: kernels and the arrays of one small problem.

y = 2 x + b (x learned, b a fixed offset that also requires grad), loss = sum sqrt((y - t)^2 + s) over a target t,
one SGD step on x per iteration. ``as_scenario.py`` drives it as a gradcheck scenario (``gradcheck run``),
``as_script.py`` as a plain training loop (``gradcheck exec``); each mistake is a fault of the one and a
``--mistake`` of the other, written the way each kind of program would write it.
"""

import warp as wp

N = 4
LR = 0.05
SMOOTHING = 1e-3


@wp.kernel
def predict(x: wp.array(dtype=float), b: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i] + b[i]


@wp.struct
class Inputs:
    x: wp.array(dtype=float)


@wp.kernel
def predict_from(inputs: Inputs, b: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * inputs.x[i] + b[i]


@wp.kernel
def distance(y: wp.array(dtype=float), t: wp.array(dtype=float), s: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    d = y[i] - t[i]
    wp.atomic_add(loss, 0, wp.sqrt(d * d + s))


@wp.kernel
def pool(x: wp.array(dtype=float), total: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(total, 0, x[i])  # an intermediate written only by atomics: backward never consumes its gradient


@wp.kernel
def pooled_distance(
    y: wp.array(dtype=float), total: wp.array(dtype=float), t: wp.array(dtype=float), loss: wp.array(dtype=float)
):
    i = wp.tid()
    d = y[i] - t[i] + 0.1 * total[0]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def steep(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, wp.exp(4.0 * x[i]))  # d/dx = 4 exp(4 x): ~3.6e7 at x = 4


@wp.kernel
def square(state: wp.array(dtype=float), scratch: wp.array(dtype=float)):
    i = wp.tid()
    scratch[i] = state[i] * state[i]


@wp.kernel
def advance(state: wp.array(dtype=float), scratch: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = state[i] - 0.1 * scratch[i] * state[i]


@wp.kernel
def sgd(x: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * g[i]


@wp.kernel
def sgd_keeping_the_step(x: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    g[i] = lr * g[i]  # the optimizer keeps its step in the gradient buffer
    x[i] = x[i] - g[i]


class Problem:
    """Every array one iteration uses, allocated once (outside any tape)."""

    def __init__(self, device=None):
        self.x = wp.array([1.0, 2.0, 3.0, 4.0], dtype=float, device=device, requires_grad=True)
        self.b = wp.array([0.1, 0.0, -0.1, 0.2], dtype=float, device=device, requires_grad=True)
        self.y = wp.zeros(N, dtype=float, device=device, requires_grad=True)
        self.target = wp.array([0.5, -0.5, 1.5, 0.0], dtype=float, device=device)
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)
        self.total = wp.zeros(1, dtype=float, device=device, requires_grad=True)
        self.doubled = wp.zeros(N, dtype=float, device=device, requires_grad=True)
        self.scratch = wp.zeros(N, dtype=float, device=device, requires_grad=True)
        self.states = [wp.zeros(N, dtype=float, device=device, requires_grad=True) for _ in range(2)]
        self.inputs = Inputs()
        self.inputs.x = self.x
        self.batches = [self.target.numpy().copy(), self.target.numpy() + 1.0]

    def land_on_target(self):
        """Put the target exactly on the prediction, so sqrt'(0) makes the gradient NaN (with no smoothing)."""
        self.target.assign(2.0 * self.x.numpy() + self.b.numpy())

    def load_batch(self, k: int):
        """A data loader refilling the target buffer with batch ``k``."""
        self.target.assign(self.batches[k % len(self.batches)])

    def forward(self, mistake: str):
        """One recorded forward (call it inside ``with tape:``); returns the loss."""
        self.loss.zero_()
        if mistake in ("changed-before-backward", "changed-inside-forward"):
            self.load_batch(0)
        if mistake == "incomplete-zeroing":
            self.total.zero_()
            wp.launch(pool, dim=N, inputs=[self.x], outputs=[self.total])
            wp.launch(predict, dim=N, inputs=[self.x, self.b], outputs=[self.y])
            wp.launch(pooled_distance, dim=N, inputs=[self.y, self.total, self.target], outputs=[self.loss])
            return self.loss
        if mistake == "explosion":
            wp.launch(steep, dim=N, inputs=[self.x], outputs=[self.loss])
            return self.loss
        if mistake == "write-after-read":  # one scratch buffer for both steps: the second rewrites what advance read
            state = self.x
            for out in self.states:
                wp.launch(square, dim=N, inputs=[state], outputs=[self.scratch])
                wp.launch(advance, dim=N, inputs=[state, self.scratch], outputs=[out])
                state = out
            wp.launch(distance, dim=N, inputs=[state, self.target, SMOOTHING], outputs=[self.loss])
            return self.loss
        if mistake == "stale-struct":
            wp.launch(predict_from, dim=N, inputs=[self.inputs, self.b], outputs=[self.y])
        elif mistake == "missing-gradient":  # x read only by the launch made before the tape (see the drivers)
            wp.launch(predict, dim=N, inputs=[self.doubled, self.b], outputs=[self.y])
        else:
            wp.launch(predict, dim=N, inputs=[self.x, self.b], outputs=[self.y])
        smoothing = 0.0 if mistake == "nan" else SMOOTHING
        wp.launch(distance, dim=N, inputs=[self.y, self.target, smoothing], outputs=[self.loss])
        if mistake == "changed-inside-forward":
            self.load_batch(1)  # prefetching the next batch into the buffer the loss launch just read
        return self.loss

    def before_tape(self, mistake: str):
        """What the program does before recording: the missing-gradient mistake doubles x outside the tape."""
        if mistake == "missing-gradient":
            wp.launch(scale_copy, dim=N, inputs=[self.x, 2.0], outputs=[self.doubled])

    def break_struct(self):
        """The stale-struct mistake: x gets a fresh gradient buffer after the struct copied its descriptor."""
        self.x.grad = wp.zeros_like(self.x)

    def step(self, mistake: str):
        kernel = sgd_keeping_the_step if mistake == "mutated-gradient" else sgd
        wp.launch(kernel, dim=N, inputs=[self.x, self.x.grad, 1e-12 if mistake == "explosion" else LR])


@wp.kernel
def scale_copy(x: wp.array(dtype=float), k: float, out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = k * x[i]


MISTAKES = {
    "clean": "the correct loop: tape.zero() after each step",
    "accumulation": "the tape is reused and never zeroed: every backward adds to the last",
    "incomplete-zeroing": "only x.grad is zeroed by hand; the pooled intermediate's gradient feeds the next backward",
    "stale-struct": "x.grad is replaced after x went into a struct: the struct keeps the old gradient pointer",
    "nan": "the target lands exactly on the prediction with no smoothing: sqrt'(0), a NaN gradient",
    "explosion": "loss = sum exp(4 x) at x up to 4: a gradient norm of ~3.6e7",
    "mutated-gradient": "the SGD step keeps its step in the gradient buffer, and the loop reads the gradient after it",
    "missing-gradient": "x is doubled by a launch made before the tape: the tape never sees x",
    "write-after-read": "one scratch buffer for both steps of the rollout: the second step rewrites what the first read",
    "changed-before-backward": "the next batch is loaded into the target between the forward and the backward",
    "changed-inside-forward": "the next batch is loaded into the target right after the loss launch read it, still "
    "inside the forward (no code of the program's between forward and backward)",
}
