"""Test module exposing scenarios three ways: an instance, a class and a factory function."""

import warp as wp


@wp.kernel
def weighted(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, float(i + 1) * x[i])


class Linear:
    description = "loss = sum((i+1) * x[i])"

    def __init__(self, name="linear"):
        self.name = name

    def setup(self, device, fault=None):
        self.x = wp.ones(4, dtype=float, device=device, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)

    def params(self):
        return {"x": self.x}

    def forward(self):
        self.loss.zero_()
        wp.launch(weighted, dim=4, inputs=[self.x], outputs=[self.loss])
        return self.loss


def make_linear():
    return Linear(name="from-factory")


instance = Linear(name="from-instance")
scenario = Linear
