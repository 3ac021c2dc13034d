"""The equivalence corpus as a gradcheck scenario: ``gradcheck run as_scenario.py --fault MISTAKE``.

The same computation and mistakes as ``as_script.py`` (see model.py), written as a scenario: forward() under the
runner's tape, the SGD step in after_backward(), the program's zero step in zero(tape).
"""

from model import MISTAKES, Problem


class Equivalence:
    name = "equivalence"
    description = "y = 2x + b with one SGD step: the corpus gradcheck run and gradcheck exec must judge alike"
    faults = {k: v for k, v in MISTAKES.items() if k != "clean"}

    def setup(self, device, fault=None):
        self.mistake = fault or "clean"
        self.p = Problem(device)
        if self.mistake == "stale-struct":
            self.p.break_struct()
        if self.mistake == "nan":
            self.p.land_on_target()
        self.p.before_tape(self.mistake)  # the missing-gradient mistake: x doubled before any tape records
        if self.mistake == "changed-before-backward":
            self.backward = self._move_target_then_backward

    def params(self):
        return {"x": self.p.x}

    def forward(self):  # inside the runner's tape
        return self.p.forward(self.mistake)

    def _move_target_then_backward(self, tape, loss):
        self.p.load_batch(1)  # the next batch loaded one line too early
        tape.backward(loss)

    def after_backward(self):
        self.p.step(self.mistake)

    def zero(self, tape):
        if self.mistake == "accumulation":
            return  # nothing cleared
        if self.mistake == "incomplete-zeroing":
            self.p.x.grad.zero_()  # the param's gradient only
            return
        tape.zero()


scenario = Equivalence
