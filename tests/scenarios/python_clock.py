"""Test scenario: state carried between forward() calls in a Python attribute, not in an array.

``self.t`` advances on every call and scales the loss, so the loss at the same params differs from call to
call. gradcheck can put back the arrays a program holds before each finite-difference rollout, not its Python
attributes: the finite differences must be skipped (saying why), never compared against the first pass.
"""

import warp as wp


@wp.kernel
def timed_energy(x: wp.array(dtype=float), t: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, t * x[i] * x[i])


class PythonClock:
    name = "python-clock"

    def setup(self, device, fault=None):
        self.x = wp.array([1.0, 2.0, 3.0], dtype=float, device=device, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)
        self.t = 1.0

    def params(self):
        return {"x": self.x}

    def forward(self):
        self.t += 0.5  # never reset
        self.loss.zero_()
        wp.launch(timed_energy, dim=3, inputs=[self.x, self.t], outputs=[self.loss])
        return self.loss


scenario = PythonClock
