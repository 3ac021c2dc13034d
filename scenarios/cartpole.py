"""Cart-pole on Newton's ``SolverFeatherstone``: the reference scenario for gradcheck.

A cart slides on a prismatic joint along x and carries a pole on a revolute joint about y.
The loss is a quadratic on the final state; the parameters are the initial joint
coordinates and velocities and every step's generalized force ``controls[i].joint_f``.

Why this scenario: it is the smallest real Newton program that shows the gradient bugs users
actually hit. The solver keeps one set of scratch matrices (``M, J, P, H, L``) for all steps, so
backward replays each step's kernels over another step's values (``--set scratch=shared``,
stock Newton); ``--set scratch=per-step`` gives each step its own matrices (bit-identical
forward) and is the clean reference. The faults reproduce three accumulation mistakes
(docs/scenarios.md lists them).
"""

from __future__ import annotations

import math

import warp as wp

from gradcheck.scenarios._featherstone import SCRATCH_CHOICES, import_newton, per_step_scratch, use_scratch
from gradcheck.scenarios._options import choice, whole

DT = 1.0 / 600.0


@wp.kernel
def final_state_loss(
    joint_q: wp.array(dtype=float),
    joint_qd: wp.array(dtype=float),
    loss: wp.array(dtype=float),
):
    # track a target cart position with the pole upright, penalise residual velocity
    x = joint_q[0] - 0.2
    theta = joint_q[1]
    loss[0] = x * x + theta * theta + 0.1 * (joint_qd[0] * joint_qd[0] + joint_qd[1] * joint_qd[1])


class CartPole:
    name = "cartpole"
    description = "Cart-pole on Newton SolverFeatherstone, loss on the final state (options: steps, scratch)"
    faults = {
        "no-zero": "states reused across passes; the loop zeroes only the parameter gradients by hand, never tape.zero()",
        "zero-before-backward": "tape.zero() called on the fresh tape before backward (zeroes nothing), nothing after",
        "state-in-tape": "states and controls created inside the tape: their gradients read 0, the gradient lands in model.joint_q.grad",
    }

    def setup(self, device, fault=None, steps="100", scratch="shared"):
        self.steps = whole("steps", steps)  # the --set values first: a wrong one is the user's, before any work
        self.scratch = choice("scratch", scratch, SCRATCH_CHOICES)
        newton = import_newton(self.name)  # heavy: imported only when the scenario runs

        self.fault = fault

        builder = newton.ModelBuilder()
        cart = builder.add_link(
            mass=1.0,
            inertia=wp.mat33(0.01, 0.0, 0.0, 0.0, 0.01, 0.0, 0.0, 0.0, 0.01),
            lock_inertia=True,
            label="cart",
        )
        pole = builder.add_link(
            mass=0.1,
            com=wp.vec3(0.0, 0.0, 0.5),
            inertia=wp.mat33(0.0084, 0.0, 0.0, 0.0, 0.0084, 0.0, 0.0, 0.0, 0.0001),
            lock_inertia=True,
            label="pole",
        )
        slider = builder.add_joint_prismatic(parent=-1, child=cart, axis=newton.Axis.X, label="slider")
        hinge = builder.add_joint_revolute(parent=cart, child=pole, axis=newton.Axis.Y, label="hinge")
        builder.add_articulation([slider, hinge], label="cartpole")
        builder.joint_q = [0.0, 0.3]
        builder.joint_qd = [0.0, 0.0]

        self.model = builder.finalize(device, requires_grad=True)
        self.solver = newton.solvers.SolverFeatherstone(self.model)
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)

        # per-step scratch: one copy of the solver's system matrices per step, swapped in before the step
        self.scratch_sets = per_step_scratch(self.solver, self.steps) if scratch == "per-step" else []

        # a smooth, non-trivial force profile so every control has a gradient of its own
        self.force_profile = [[0.5 * math.sin(2.0 * math.pi * i / self.steps), 0.0] for i in range(self.steps)]
        # under state-in-tape, forward() allocates them again inside the tape (the bug)
        self._allocate_states()

    def _allocate_states(self):
        self.states = [self.model.state() for _ in range(self.steps + 1)]
        self.controls = [self.model.control() for _ in range(self.steps)]
        for control, force in zip(self.controls, self.force_profile):
            control.joint_f.assign(force)

    def params(self):
        params = {
            "states[0].joint_q": self.states[0].joint_q,
            "states[0].joint_qd": self.states[0].joint_qd,
        }
        for i, control in enumerate(self.controls):
            params[f"controls[{i}].joint_f"] = control.joint_f
        return params

    def forward(self):
        if self.fault == "state-in-tape":
            # the bug: Model.state()/control() copy model arrays with a taped wp.copy
            self._allocate_states()
        for i in range(self.steps):
            if self.scratch_sets:
                use_scratch(self.solver, self.scratch_sets[i])
            self.solver.step(self.states[i], self.states[i + 1], self.controls[i], None, DT)
        final = self.states[-1]
        wp.launch(final_state_loss, dim=1, inputs=[final.joint_q, final.joint_qd], outputs=[self.loss])
        return self.loss

    def backward(self, tape, loss):
        if self.fault == "zero-before-backward":
            tape.zero()  # a no-op: Tape.gradients is filled only during backward
        tape.backward(loss)

    def zero(self, tape):
        if self.fault == "no-zero":
            for arr in self.params().values():
                arr.grad.zero_()
        elif self.fault == "zero-before-backward":
            pass
        else:
            tape.zero()


scenario = CartPole
