"""`gradcheck new NAME`: a scenario file implementing the contract, ready to edit and to run."""

from __future__ import annotations

import re
from pathlib import Path

from gradcheck.model.errors import UsageError

TEMPLATE = '''"""{name}: describe what this scenario differentiates, in one line (shown by `gradcheck list`).

Run it: gradcheck run {filename}
The scenario contract: setup(device, fault=None, **options), params(), forward(); optional
backward(tape, loss), after_backward(), zero(tape). Allocate everything in setup(), outside the tape.
"""

import warp as wp


@wp.kernel
def loss_kernel(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    # replace with your computation; keep the loss a single float
    wp.atomic_add(loss, 0, x[i] * x[i])


class {cls}:
    name = "{name}"
    description = "{name}: edit this description"
    faults = {{}}  # optional: {{"fault-name": "a known bug this scenario can reproduce"}}

    def setup(self, device, fault=None, n="8"):
        # options arrive as strings from --set key=value: check them first; a ValueError naming the option is
        # reported as a usage error (exit 2), not as a broken scenario
        if not str(n).isdigit() or int(n) < 1:
            raise ValueError(f"n must be a whole number of at least 1, got {{n!r}}")
        self.fault = fault
        self.x = wp.array([0.1 * i for i in range(int(n))], dtype=float, device=device, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)

    def params(self):
        # {{name: array}} whose gradients gradcheck checks (requires_grad=True)
        return {{"x": self.x}}

    def forward(self):
        # runs under gradcheck's tape; return the scalar loss array
        self.loss.zero_()
        wp.launch(loss_kernel, dim=self.x.shape[0], inputs=[self.x], outputs=[self.loss])
        return self.loss

    # optional hooks, as your training loop does them:
    # def backward(self, tape, loss): tape.backward(loss)
    # def after_backward(self): ...        e.g. an optimizer step
    # def zero(self, tape): tape.zero()


scenario = {cls}
'''


def write_scenario(name: str, directory: Path, force: bool = False) -> Path:
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", name):
        raise UsageError(f"scenario name {name!r} must start with a letter and use letters, digits, '-' or '_'")
    stem = name.replace("-", "_")
    path = directory / f"{stem}.py"
    if path.exists() and not force:
        raise UsageError(f"{path} already exists; choose another name or pass --force")
    cls = "".join(part.capitalize() for part in re.split(r"[-_]", name))
    path.write_text(TEMPLATE.format(name=name, filename=path.name, cls=cls), encoding="utf-8")
    return path
