"""The cleared-gradient corpus as a gradcheck scenario: ``gradcheck run as_scenario.py --fault VARIANT``.

The same fit and variants as ``train.py`` (see cleared_model.py), written as a scenario: forward() under the runner's
tape, backward(tape, loss) keeping the tape, the update in after_backward() (where a scenario's loop updates),
the zero step there too (``tape.zero()`` on the runner's tape) or in zero(tape).
"""

from cleared_model import VARIANTS, Fit


class ClearedGradient:
    name = "cleared-gradient"
    description = "a two-param fit with one SGD launch each; the zero step before or after the update"
    faults = {k: v for k, v in VARIANTS.items() if k != "clean"}

    def setup(self, device, fault=None):
        self.variant = fault or "clean"
        self.p = Fit(device)
        self.tape = None

    def params(self):
        return {"w": self.p.w, "b": self.p.b}

    def forward(self):  # inside the runner's tape
        return self.p.forward()

    def backward(self, tape, loss):
        self.tape = tape  # the loop's tape: its zero step may run in after_backward()
        tape.backward(loss)

    def after_backward(self):
        self.p.update(self.variant, self.tape.zero)

    def zero(self, tape):
        pass  # update() ran the zero step where the variant puts it


scenario = ClearedGradient
