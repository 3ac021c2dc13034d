"""Test scenarios that fail in each phase (bad-input tests). Select with --set phase=..."""

import warp as wp


@wp.kernel
def nan_loss(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, 0.5 * x[i] + 0.0 * wp.sqrt(x[i]))  # x = 0: finite loss, gradient 0.5 + 0 * inf = NaN


class Raises:
    name = "raises"
    description = "misbehaves in the phase given by --set phase=setup|forward|vector-loss|no-grad|bad-params|all-nan"

    def setup(self, device, fault=None, phase="setup"):
        self.phase = phase
        if phase == "setup":
            raise RuntimeError("setup failed on purpose")
        self.x = wp.zeros(3, dtype=float, device=device, requires_grad=True)

    def params(self):
        if self.phase == "bad-params":
            return {"x": [1.0, 2.0]}
        return {"x": self.x}

    def forward(self):
        if self.phase == "forward":
            raise ValueError("forward failed on purpose")
        if self.phase == "vector-loss":
            return self.x
        if self.phase == "all-nan":
            self.loss = wp.zeros(1, dtype=float, requires_grad=True)
            wp.launch(nan_loss, dim=3, inputs=[self.x], outputs=[self.loss])
            return self.loss
        return wp.zeros(1, dtype=float)


scenario = Raises
