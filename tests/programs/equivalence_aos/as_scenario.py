"""The array-of-structs corpus as a gradcheck scenario: ``gradcheck run as_scenario.py --fault accumulation``.

The same computation and mistake as ``as_script.py`` (see aos_model.py): forward() under the runner's tape, the SGD
step in after_backward(), the program's zero step in zero(tape).
"""

from aos_model import MISTAKES, Problem


class StructEquivalence:
    name = "equivalence-aos"
    description = "a param that is an array of structs, with one SGD step: run and exec must judge it alike"
    faults = {k: v for k, v in MISTAKES.items() if k != "clean"}

    def setup(self, device, fault=None):
        self.mistake = fault or "clean"
        self.p = Problem(device)

    def params(self):
        return {"ps": self.p.ps}

    def forward(self):  # inside the runner's tape
        return self.p.forward()

    def after_backward(self):
        self.p.step()

    def zero(self, tape):
        if self.mistake != "accumulation":  # the accumulation mistake clears nothing
            tape.zero()


scenario = StructEquivalence
