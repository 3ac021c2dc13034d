"""The divergence corpus as a scenario: ``gradcheck run as_scenario.py [--fault huge-gradient]``.

The quadratic bowl of quadratic.py with the diverging step of ``train.py --step 2.5`` in after_backward(). Under
``run`` every pass restores the params, so no update is ever seen growing: the scenario form of the mistake is
its gradient, far above --max-norm when the bowl is 1e4 times steeper (the ``huge-gradient`` fault).
"""

import warp as wp
from quadratic import SHAPE, N, bowl, step


class Bowl:
    name = "divergence-bowl"
    description = "a quadratic bowl with a gradient step of 2.5/K in after_backward (restored every pass)"
    faults = {"huge-gradient": "the bowl 1e4 times steeper (curvature 1e8): a gradient norm of ~1.4e8"}

    def setup(self, device, fault=None):
        self.curvature = 1e8 if fault == "huge-gradient" else 1e4
        self.x = wp.ones(N, dtype=float, device=device, requires_grad=True)
        self.k = wp.array([self.curvature * c for c in SHAPE], dtype=float, device=device)
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)

    def params(self):
        return {"x": self.x}

    def forward(self):
        self.loss.zero_()
        wp.launch(bowl, dim=N, inputs=[self.x, self.k], outputs=[self.loss])
        return self.loss

    def after_backward(self):
        wp.launch(step, dim=N, inputs=[self.x, self.x.grad, 2.5 / self.curvature])

    def zero(self, tape):
        tape.zero()


scenario = Bowl
