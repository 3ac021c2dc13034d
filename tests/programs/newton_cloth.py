"""Newton's ``examples/diffsim/example_diffsim_cloth.py``, unmodified, wrapped as a scenario.

A 16x16 cloth (289 particles, SolverSemiImplicit) flies for 120 frames of 16 substeps (1,920 steps); the loss is
the squared distance of its centre of mass to a target (≈ 271.6); the params are the initial particle
velocities. The example's forward() returns nothing: the wrapper returns its loss array. Its constructor
captures forward and backward once (on CPU that runs them): setup() clears that gradient, as the training
loop does after each step.

Why it is in the corpus: float32 noise. The loss is smooth at large scales and noisy at small ones (sigma ≈ 6e-5
along single velocities), so a central difference at a small step is garbage (field notes §6) while the tape's
gradient is right. Truth, established independently (tests/test_programs.py, slow lane): central differences at
steps 1e-1 … 3e-3 agree with the tape within a few percent; below 1e-3 they scatter.
"""

from types import SimpleNamespace

import warp as wp


class Cloth:
    name = "newton-cloth"
    description = "Newton's diffsim cloth example, unmodified (289 initial velocities, 1,920 semi-implicit steps)"

    def setup(self, device, fault=None):
        import newton.viewer
        from newton.examples.diffsim.example_diffsim_cloth import Example

        with wp.ScopedDevice(device):
            self.example = Example(newton.viewer.ViewerNull(), SimpleNamespace(verbose=False))
        self.example.tape.zero()  # the constructor's capture ran forward and backward once

    def params(self):
        return {"states[0].particle_qd": self.example.states[0].particle_qd}

    def forward(self):
        self.example.forward()
        return self.example.loss


scenario = Cloth
