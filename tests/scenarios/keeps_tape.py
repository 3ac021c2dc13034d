"""Test scenario: a program object from a ``warp.*`` package that keeps the tape it is given.

The helper's class says it lives in ``warp.examples`` (as the classes of Warp's shipped example programs
do), and ``backward`` keeps the tape, as training loops that re-use it do. Names must come from the program
(``sim.x``), never from gradcheck's own probe tape. The scratch array is a local of forward(), reused by
two launches, and the launch that reads it squares it (its adjoint reads the values): write-after-read must name
it by its kernel argument.
"""

import warp as wp


@wp.kernel
def square(x: wp.array(dtype=float), scratch: wp.array(dtype=float)):
    i = wp.tid()
    scratch[i] = x[i] * x[i]


@wp.kernel
def accumulate(scratch: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, scratch[i] * scratch[i])


class Simulation:
    def __init__(self, device):
        self.x = wp.array([1.0, 2.0, 3.0], dtype=float, device=device, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)


Simulation.__module__ = "warp.examples.example_keeps_tape"


class KeepsTape:
    name = "keeps-tape"

    def setup(self, device, fault=None):
        self.sim = Simulation(device)
        self._tape = None

    def params(self):
        return {"x": self.sim.x}

    def forward(self):
        scratch = wp.zeros(3, dtype=float, requires_grad=True)
        self.sim.loss.zero_()
        wp.launch(square, dim=3, inputs=[self.sim.x], outputs=[scratch])
        wp.launch(accumulate, dim=3, inputs=[scratch], outputs=[self.sim.loss])
        wp.launch(square, dim=3, inputs=[self.sim.loss], outputs=[scratch])  # scratch rewritten after it was read
        return self.sim.loss

    def backward(self, tape, loss):
        self._tape = tape  # kept, as loops that re-use their tape do
        tape.backward(loss)


scenario = KeepsTape
