"""Test scenario: float32 inputs around 1e3 with a correct gradient.

loss = sum(sin(x / 300)) * 1e3. A fixed absolute step of 1e-4 is below float32's resolution at
1e3 (spacing 6e-5) and makes finite differences fail on a correct gradient; a step relative to the
input scale does not.
"""

import warp as wp


@wp.kernel
def wave(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, 1000.0 * wp.sin(x[i] / 300.0))


class LargeInputs:
    name = "large-inputs"
    description = "float32 inputs ~1e3, correct gradient"

    def setup(self, device, fault=None):
        self.x = wp.array([900.0 + 37.0 * i for i in range(8)], dtype=float, device=device, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)

    def params(self):
        return {"x": self.x}

    def forward(self):
        self.loss.zero_()
        wp.launch(wave, dim=8, inputs=[self.x], outputs=[self.loss])
        return self.loss


scenario = LargeInputs
