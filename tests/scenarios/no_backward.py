"""Test scenario: the loss goes through a kernel built with ``enable_backward=False`` (pure Warp).

Warp then propagates no gradient through that launch (it prints a warning per backward), so the param's
gradient is exactly zero. missing-gradient must say why, and must not talk about Newton states.
"""

import warp as wp


@wp.kernel(enable_backward=False)
def squared_sum(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


class NoBackward:
    name = "no-backward"

    def setup(self, device, fault=None):
        self.x = wp.array([1.0, 2.0, 3.0], dtype=float, device=device, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)

    def params(self):
        return {"x": self.x}

    def forward(self):
        self.loss.zero_()
        wp.launch(squared_sum, dim=3, inputs=[self.x], outputs=[self.loss])
        return self.loss


scenario = NoBackward
