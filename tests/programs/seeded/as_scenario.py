"""jvp.py as a scenario: ``gradcheck run as_scenario.py --fault cusp|loop``. The same kernels and seed, the backward
seeded with ``grads=`` on the vector output (no scalar loss), x and b declared as the params."""

import warp as wp
from seeded_kernels import cusp, square_of_sum, square_of_sum_fixed


class Seeded:
    name = "seeded-jvp"
    description = "y = (-x - sqrt(|x - c|), (sum b)^2), backward seeded with grads= on y: the twin of jvp.py"
    faults = {
        "cusp": "the unguarded cusp: x.grad is -inf from backward alone, the seeded output finite",
        "loop": "the sum over a runtime-bound loop: Warp 1.19 gives b.grad exactly 0",
    }

    def setup(self, device, fault=None):
        self.fault = fault
        self.x = wp.array([1.0], dtype=float, device=device, requires_grad=True)
        self.b = wp.array([1.0, 0.0, 0.0, 0.0], dtype=float, device=device, requires_grad=True)
        self.y = wp.zeros(2, dtype=float, device=device, requires_grad=True)
        self.seed = wp.array([1.0, 1.0], dtype=float, device=device)

    def params(self):
        return {"x": self.x, "b": self.b}

    def forward(self):
        wp.launch(cusp, dim=1, inputs=[self.x, 1.0, int(self.fault != "cusp")], outputs=[self.y])
        loop = square_of_sum if self.fault == "loop" else square_of_sum_fixed
        wp.launch(loop, dim=1, inputs=[self.b, 1], outputs=[self.y[1:]])
        return self.y

    def backward(self, tape, output):
        tape.backward(grads={output: self.seed})


scenario = Seeded
