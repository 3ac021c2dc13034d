"""rows_fault.py and rows_zeroed.py as a scenario: its backward takes the Jacobian of y = x * x row by row.

Fault ``no-zero-between-rows``: nothing clears x.grad between the rows, so the rows it reads carry the rows before
them (the clean scenario calls ``tape.zero()`` after reading each row). The runner's own zero step after the pass
clears everything, so every pass reads the same wrong rows: only the reads between the backwards show the fault.
"""

import numpy as np
import warp as wp
from rows_kernels import one_hot, square


class JacobianRows:
    name = "jacobian-rows"
    faults = {"no-zero-between-rows": "x.grad is not cleared between the Jacobian's rows"}

    def setup(self, device, fault=None):
        self.fault = fault
        self.x = wp.array([1.0, 2.0, 3.0], dtype=float, device=device, requires_grad=True)
        self.y = wp.zeros(3, dtype=float, device=device, requires_grad=True)
        self.rows = []

    def params(self):
        return {"x": self.x}

    def forward(self):
        wp.launch(square, dim=3, inputs=[self.x], outputs=[self.y])
        return self.y

    def backward(self, tape, y):
        rows = []
        for i in range(3):
            tape.backward(grads={y: one_hot(i)})
            rows.append(self.x.grad.numpy().copy())
            if self.fault is None:
                tape.zero()
        self.rows = np.array(rows)


scenario = JacobianRows
