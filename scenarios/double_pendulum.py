"""Chaotic double pendulum on a cart (Newton's bundled ``cartpole.urdf``), SolverFeatherstone.

Not a planted bug: the dynamics are chaotic, so the sensitivity of the final state to earlier
states and controls grows exponentially with the horizon, and so does the gradient. At the
default horizon the gradients are healthy; at long horizons (``--set steps=...``) the explosion
check reports how far the gradient norm grows along ``controls[*].joint_f``. Per-step solver
scratch by default (``--set scratch=shared`` for stock Newton), so what grows is the physics.
"""

from __future__ import annotations

import math
import os

import warp as wp

from gradcheck.scenarios._featherstone import SCRATCH_CHOICES, import_newton, per_step_scratch, use_scratch
from gradcheck.scenarios._options import choice, whole

DT = 1.0 / 600.0


@wp.kernel
def tip_loss(joint_q: wp.array(dtype=float), joint_qd: wp.array(dtype=float), loss: wp.array(dtype=float)):
    # keep both poles upright and the cart near the origin at the end of the rollout
    loss[0] = (
        joint_q[0] * joint_q[0]
        + joint_q[1] * joint_q[1]
        + joint_q[2] * joint_q[2]
        + 0.01 * (joint_qd[1] * joint_qd[1] + joint_qd[2] * joint_qd[2])
    )


class DoublePendulum:
    name = "double-pendulum"
    description = "Chaotic cart double pendulum (Newton cartpole.urdf, Featherstone); gradients explode with the horizon (options: steps, scratch)"
    faults = {}

    def setup(self, device, fault=None, steps="200", scratch="per-step"):
        self.steps = whole("steps", steps)  # the --set values first: a wrong one is the user's, before any work
        choice("scratch", scratch, SCRATCH_CHOICES)
        newton = import_newton(self.name)
        from newton.examples import get_asset_directory

        builder = newton.ModelBuilder()
        builder.add_urdf(
            os.path.join(get_asset_directory(), "cartpole.urdf"),
            floating=False,
            enable_self_collisions=False,
        )
        builder.joint_q[-3:] = [0.0, 0.3, 0.0]
        builder.joint_qd[-3:] = [0.0, 0.0, 0.0]
        self.model = builder.finalize(device, requires_grad=True)
        self.solver = newton.solvers.SolverFeatherstone(self.model)
        self.scratch_sets = per_step_scratch(self.solver, self.steps) if scratch == "per-step" else []
        self.states = [self.model.state() for _ in range(self.steps + 1)]
        self.controls = [self.model.control() for _ in range(self.steps)]
        for i, control in enumerate(self.controls):
            control.joint_f.assign([0.2 * math.sin(2.0 * math.pi * i / max(self.steps, 1)), 0.0, 0.0])
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)

    def params(self):
        params = {"states[0].joint_q": self.states[0].joint_q, "states[0].joint_qd": self.states[0].joint_qd}
        for i, control in enumerate(self.controls):
            params[f"controls[{i}].joint_f"] = control.joint_f
        return params

    def forward(self):
        for i in range(self.steps):
            if self.scratch_sets:
                use_scratch(self.solver, self.scratch_sets[i])
            self.solver.step(self.states[i], self.states[i + 1], self.controls[i], None, DT)
        final = self.states[-1]
        wp.launch(tip_loss, dim=1, inputs=[final.joint_q, final.joint_qd], outputs=[self.loss])
        return self.loss


scenario = DoublePendulum
