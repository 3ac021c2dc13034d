"""Newton's ``examples/diffsim/example_diffsim_ball.py``, unmodified, wrapped as a scenario.

A ball (one particle) is thrown at a wall and bounces off it and the ground (SolverSemiImplicit with soft
penalty contacts, 36 frames x 8 substeps = 288 steps); the loss is the squared distance of its last position
to a target; the param is its initial velocity. The constructor captures forward and backward once (on CPU
that runs them), so setup() clears the gradient with the example's tape, as its training loop does.

Truth, established independently (tests/test_programs.py): see the test's docstring.
"""

from types import SimpleNamespace

import warp as wp


class Ball:
    name = "newton-ball"
    description = "Newton's diffsim ball example, unmodified (initial velocity, 288 steps with contacts)"

    def setup(self, device, fault=None):
        import newton.viewer
        from newton.examples.diffsim.example_diffsim_ball import Example

        with wp.ScopedDevice(device):
            self.example = Example(newton.viewer.ViewerNull(), SimpleNamespace(verbose=False))
        self.example.tape.zero()

    def params(self):
        return {"states[0].particle_qd": self.example.states[0].particle_qd}

    def forward(self):
        return self.example.forward()


scenario = Ball
