"""The vanishing corpus as a scenario: ``gradcheck run as_scenario.py [--fault drag-units]`` (see vanishing_model.py).

Every pass starts from the same params, so each pass is a first backward: ``p.drag`` in the wrong units is below
float32's resolution on all of them; ``p.layer.bias`` is as small, beside its training sibling ``p.layer.weight``.
"""

from vanishing_model import MISTAKES, Fit


class VanishingFit:
    name = "vanishing-fit"
    description = "a gated line fit with a drag coefficient: vanishing judges the drag, not the saturated gate"
    faults = MISTAKES

    def setup(self, device, fault=None):
        self.p = Fit(device, fault or "clean")

    def params(self):
        return self.p.params()

    def forward(self):
        return self.p.forward()

    def after_backward(self):
        self.p.step()


scenario = VanishingFit
