"""Test scenario: an intermediate the scenario object never holds (allocated inside forward()).

Its gradient can only be named by the kernel argument that used it: ``square.y.grad``. The
``no-zero`` fault leaves it nonzero after the (empty) zero step.
"""

import warp as wp


@wp.kernel
def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel
def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i])


class LocalIntermediate:
    name = "local-intermediate"
    description = "y = x*x allocated inside forward(), never stored on the scenario"
    faults = {"no-zero": "no zero step: the intermediate's retained gradient survives"}

    def setup(self, device, fault=None):
        self.fault = fault
        self.x = wp.array([1.0, 2.0], dtype=float, device=device, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)

    def params(self):
        return {"x": self.x}

    def forward(self):
        self.loss.zero_()
        y = wp.zeros(2, dtype=float, requires_grad=True, retain_grad=True)  # local: unreachable by name
        wp.launch(square, dim=2, inputs=[self.x], outputs=[y])
        wp.launch(total, dim=2, inputs=[y], outputs=[self.loss])
        return self.loss

    def zero(self, tape):
        if self.fault != "no-zero":
            tape.zero()


scenario = LocalIntermediate
