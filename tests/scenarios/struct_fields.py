"""Test scenario: params reached through nested struct fields (``model.geo.scale``).

The kernel takes the outer struct; its gradient buffers are reached through struct fields, two
levels deep. ``no-zero`` skips the zero step, so the survivors must be named by field path.
"""

import warp as wp


@wp.struct
class Geometry:
    scale: wp.array(dtype=float)
    thickness: wp.array[float]


@wp.struct
class Model:
    geo: Geometry
    weights: wp.array(dtype=wp.vec3)


@wp.kernel
def model_loss(model: Model, loss: wp.array(dtype=float)):
    i = wp.tid()
    s = model.geo.scale[i] * model.geo.thickness[i]
    wp.atomic_add(loss, 0, s * s + wp.dot(model.weights[i], model.weights[i]))


class StructFields:
    name = "struct-fields"
    description = "loss through a nested wp.struct (model.geo.scale, model.geo.thickness, model.weights)"
    faults = {
        "no-zero": "no zero step: struct-field gradients survive",
        "late-requires-grad": "thickness (a wp.array[float] field) gets requires_grad after it was assigned",
    }

    def setup(self, device, fault=None):
        self.fault = fault
        self.scale = wp.array([1.0, 2.0], dtype=float, device=device, requires_grad=True)
        late = fault == "late-requires-grad"
        self.thickness = wp.array([0.5, 0.25], dtype=float, device=device, requires_grad=not late)
        self.weights = wp.array([(1.0, 0.0, 0.0), (0.0, 2.0, 0.0)], dtype=wp.vec3, device=device, requires_grad=True)
        geo = Geometry()
        geo.scale = self.scale
        geo.thickness = self.thickness
        self.model = Model()
        self.model.geo = geo
        self.model.weights = self.weights
        if late:  # after assembly: the model's copy of geo keeps a null gradient pointer for thickness
            self.thickness.requires_grad = True
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)

    def params(self):
        return {"scale": self.scale, "thickness": self.thickness, "weights": self.weights}

    def forward(self):
        self.loss.zero_()
        wp.launch(model_loss, dim=2, inputs=[self.model], outputs=[self.loss])
        return self.loss

    def zero(self, tape):
        if self.fault != "no-zero":
            tape.zero()


scenario = StructFields
