"""Test scenario: gradients reachable only through an array of structs.

Each ``Part`` record holds a weight array; the kernel reads the weights through
``wp.array(dtype=Part)``. Warp copies the descriptors into the records and ``tape.zero()`` never
sees the weight gradients, so a loop that relies on it accumulates. The clean variant zeroes the
weight gradients by hand after ``tape.zero()``.
"""

import warp as wp


@wp.struct
class Part:
    weight: wp.array(dtype=float)
    scale: float


@wp.kernel
def parts_loss(parts: wp.array(dtype=Part), loss: wp.array(dtype=float)):
    i = wp.tid()
    p = parts[i]
    w = p.weight[0]
    wp.atomic_add(loss, 0, p.scale * w * w)


class StructArray:
    name = "struct-array"
    description = "weights read through wp.array(dtype=Part); tape.zero() cannot reach their gradients"
    faults = {"tape-zero-only": "the loop relies on tape.zero(), which skips gradients behind an array of structs"}

    def setup(self, device, fault=None):
        self.fault = fault
        self.weights = [wp.array([1.0 + i], dtype=float, device=device, requires_grad=True) for i in range(3)]
        records = []
        for i, w in enumerate(self.weights):
            part = Part()
            part.weight = w
            part.scale = float(i + 1)
            records.append(part)
        self.parts = wp.array(records, dtype=Part, device=device)
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)

    def params(self):
        return {f"weights[{i}]": w for i, w in enumerate(self.weights)}

    def forward(self):
        self.loss.zero_()
        wp.launch(parts_loss, dim=len(self.weights), inputs=[self.parts], outputs=[self.loss])
        return self.loss

    def zero(self, tape):
        tape.zero()
        if self.fault != "tape-zero-only":
            for w in self.weights:
                w.grad.zero_()


scenario = StructArray
