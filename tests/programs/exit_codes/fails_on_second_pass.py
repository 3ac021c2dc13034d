"""The clean spring chain whose forward fails on its second call: the scenario's own error (exit 3), after a first
pass that is checked and reported."""

from __future__ import annotations

from gradcheck.scenarios.spring_chain import SpringChain


class FailsOnSecondPass(SpringChain):
    calls = 0

    def forward(self):
        self.calls += 1
        if self.calls == 2:
            raise RuntimeError("the data file vanished")
        return super().forward()


scenario = FailsOnSecondPass
