"""Test scenario: a vector output seeded by the scenario's own backward (``tape.backward(grads=...)``).

There is no scalar loss, so the finite-difference check has nothing to difference: it must say so and
not compare the gradient of sum(y) with the derivative of y[0].
"""

import warp as wp


@wp.kernel
def cube(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i] * x[i]


class VectorOutput:
    name = "vector-output"

    def setup(self, device, fault=None):
        self.x = wp.array([1.0, 2.0, 3.0], dtype=float, device=device, requires_grad=True)
        self.y = wp.zeros(3, dtype=float, device=device, requires_grad=True)
        self.seed = wp.ones(3, dtype=float, device=device)

    def params(self):
        return {"x": self.x}

    def forward(self):
        wp.launch(cube, dim=3, inputs=[self.x], outputs=[self.y])
        return self.y

    def backward(self, tape, output):
        tape.backward(grads={output: self.seed})


scenario = VectorOutput
