"""Test scenarios that fail in each phase (bad-input tests). Select with --set phase=..."""

import warp as wp


class Raises:
    name = "raises"
    description = "raises in the phase given by --set phase=setup|forward|import"

    def setup(self, device, fault=None, phase="setup"):
        self.phase = phase
        if phase == "setup":
            raise RuntimeError("setup failed on purpose")
        self.x = wp.zeros(3, dtype=float, device=device, requires_grad=True)

    def params(self):
        return {"x": self.x}

    def forward(self):
        if self.phase == "forward":
            raise ValueError("forward failed on purpose")
        if self.phase == "vector-loss":
            return self.x
        return wp.zeros(1, dtype=float)


scenario = Raises
