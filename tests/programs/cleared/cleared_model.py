"""The model code both halves of the cleared-gradient corpus share: kernels and the arrays of one small fit.

loss = sum (w x + b - t)^2 over four points, w and b learned with one SGD launch each per iteration. ``train.py``
drives it as a plain training loop (``gradcheck exec``), ``as_scenario.py`` as a scenario (``gradcheck run``); each
variant is a ``--variant`` of the one and a fault of the other, written the way each kind of program writes it.
The mistake: the zero step before the update, so the update reads zeros and the fit never moves.
"""

import warp as wp

N = 4
LR = 0.05
CLIP = 0.5


@wp.kernel
def fit(
    w: wp.array(dtype=float),
    b: wp.array(dtype=float),
    x: wp.array(dtype=float),
    t: wp.array(dtype=float),
    loss: wp.array(dtype=float),
):
    i = wp.tid()
    d = w[i] * x[i] + b[i] - t[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd(param: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    param[i] = param[i] - lr * grad[i]


@wp.kernel
def project(grad: wp.array(dtype=float), free: wp.array(dtype=float)):
    i = wp.tid()
    grad[i] = grad[i] * free[i]  # onto the constraints: a pinned value (free = 0) gets no step


@wp.kernel
def clip_in_place(grad: wp.array(dtype=float), limit: float):
    i = wp.tid()
    grad[i] = wp.clamp(grad[i], -limit, limit)


class Fit:
    """Every array one iteration uses, allocated once (outside any tape)."""

    def __init__(self, device=None):
        self.w = wp.array([1.0, 0.5, -0.5, 2.0], dtype=float, device=device, requires_grad=True)
        self.b = wp.array([0.0, 0.1, 0.2, -0.1], dtype=float, device=device, requires_grad=True)
        self.x = wp.array([1.0, 2.0, 3.0, 4.0], dtype=float, device=device)
        self.t = wp.array([2.0, 1.0, 0.0, -1.0], dtype=float, device=device)
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)
        self.pinned = wp.zeros(N, dtype=float, device=device)  # every value pinned (the projected-to-zero variant)
        # the gradients copied into buffers of the program's own (the own-gradient variant)
        self.own = [wp.zeros(N, dtype=float, device=device) for _ in range(2)]
        self.updates = 0  # updates made so far (the warm-up-freeze variant holds every param for the first two)

    def forward(self):
        """One recorded forward (call it inside ``with tape:``); returns the loss."""
        self.loss.zero_()
        wp.launch(fit, dim=N, inputs=[self.w, self.b, self.x, self.t], outputs=[self.loss])
        return self.loss

    def update(self, variant: str, zero) -> None:
        """Everything between backward and the next forward: the update, with the zero step (``zero()``) where
        ``variant`` puts it."""
        params = (self.w, self.b)
        self.updates += 1
        if variant == "zero-before-update":
            zero()  # the mistake: the update below reads the zeros tape.zero() left
        elif variant == "zeroed-by-hand":
            for p in params:
                p.grad.zero_()  # the same mistake, by hand
        elif variant == "freeze-bias":
            self.b.grad.zero_()  # b frozen on purpose: w still trains
        elif variant == "warm-up-freeze" and self.updates <= 2:
            for p in params:
                p.grad.zero_()  # every param held on purpose for the first two updates, then trained
        elif variant == "clip-before-update":
            for p in params:
                wp.launch(clip_in_place, dim=N, inputs=[p.grad, CLIP])  # preparing what the update consumes
        elif variant == "projected-to-zero":
            for p in params:
                wp.launch(project, dim=N, inputs=[p.grad, self.pinned])  # all zero: the program's own answer
        if variant == "own-gradient":
            for p, own in zip(params, self.own):
                wp.copy(own, p.grad)
            zero()  # cleared, but the update below reads the program's own copies
            for p, own in zip(params, self.own):
                wp.launch(sgd, dim=N, inputs=[p, own, LR])
            return
        for p in params:
            wp.launch(sgd, dim=N, inputs=[p, p.grad, LR])
        if variant != "zero-before-update":
            zero()  # the normal loop: the zero step after the update


VARIANTS = {
    "clean": "the correct loop: backward, SGD on w and b, then tape.zero()",
    "zero-before-update": "tape.zero() before the SGD launches: they read zeros, the fit never moves",
    "zeroed-by-hand": "w.grad and b.grad zeroed by hand (zero_()) before the SGD launches",
    "freeze-bias": "b.grad zeroed before the update on purpose (b frozen); w trains",
    "warm-up-freeze": "w.grad and b.grad zeroed by hand before the first two updates (a freeze), then trained",
    "clip-before-update": "the gradients clipped in place before the update consumes them",
    "projected-to-zero": "the gradients projected onto constraints that pin every value (a launch zeroes them)",
    "own-gradient": "the gradients copied into buffers of the program's own, tape.zero(), then SGD from the copies",
}
