"""Newton's ``examples/diffsim/example_diffsim_spring_cage.py``, unmodified, wrapped as a scenario.

A particle hangs in a cage of 8 springs (SolverSemiImplicit, 30 steps); the loss is its squared distance to
a target; the params are the springs' rest lengths. The example's own constructor captures forward and
backward once (on CPU that runs them), which leaves a gradient in ``spring_rest_length.grad``: setup()
clears it with the example's tape, as its training loop does after every step.

Truth, established independently (tests/test_programs.py): central differences of every rest length at
steps 1e-1 … 1e-4 agree with the tape to 5e-4 relative, and least-squares slopes over 9 points confirm it.
"""

from types import SimpleNamespace

import warp as wp


class SpringCage:
    name = "newton-spring-cage"
    description = "Newton's diffsim spring cage example, unmodified (8 rest lengths, 30 semi-implicit steps)"

    def setup(self, device, fault=None):
        import newton.viewer
        from newton.examples.diffsim.example_diffsim_spring_cage import Example

        with wp.ScopedDevice(device):
            self.example = Example(newton.viewer.ViewerNull(), SimpleNamespace(verbose=False))
        self.example.tape.zero()  # the constructor's capture ran forward and backward once

    def params(self):
        return {"model.spring_rest_length": self.example.model.spring_rest_length}

    def forward(self):
        return self.example.forward()


scenario = SpringCage
