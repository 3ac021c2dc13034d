"""The model code both halves of the array-of-structs equivalence corpus share: one kernel module, one array.

A param that is an array of structs with two float fields, ``ps`` (``wp.array(dtype=Particle)``), loss =
sum(a^2 + 2 b) over its records, one SGD step per iteration written through the records. ``as_scenario.py``
drives it as a gradcheck scenario (``gradcheck run``), ``as_script.py`` as a plain training loop
(``gradcheck exec``); the accumulation mistake is a fault of the one and a ``--mistake`` of the other: the
gradient is never zeroed, so every backward adds to the last, in the float fields of ``ps.grad``.
"""

import warp as wp

N = 4
LR = 0.05


@wp.struct
class Particle:
    a: float
    b: float


@wp.kernel
def energy(ps: wp.array(dtype=Particle), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, ps[i].a * ps[i].a + 2.0 * ps[i].b)


@wp.kernel
def sgd(ps: wp.array(dtype=Particle), g: wp.array(dtype=Particle), lr: float):
    i = wp.tid()
    p = ps[i]
    p.a = p.a - lr * g[i].a
    p.b = p.b - lr * g[i].b
    ps[i] = p


class Problem:
    """Every array one iteration uses, allocated once (outside any tape)."""

    def __init__(self, device=None):
        records = []
        for k in range(N):
            p = Particle()
            p.a, p.b = 1.0 + k, 0.5 - k
            records.append(p)
        self.ps = wp.array(records, dtype=Particle, device=device, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)

    def forward(self):
        """One recorded forward (call it inside ``with tape:``); returns the loss."""
        self.loss.zero_()
        wp.launch(energy, dim=N, inputs=[self.ps], outputs=[self.loss])
        return self.loss

    def step(self):
        wp.launch(sgd, dim=N, inputs=[self.ps, self.ps.grad, LR])


MISTAKES = {
    "clean": "the correct loop: tape.zero() after each step",
    "accumulation": "the tape is reused and never zeroed: every backward adds to the last, in ps.grad's float fields",
}
