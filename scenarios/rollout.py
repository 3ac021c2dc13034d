"""A pure-Warp rollout differentiated once per output: the usage behind NVIDIA/warp#407.

``states[k+1] = states[k] + dt * (theta * states[k] - states[k]**3)`` for k < steps, all on one tape.
Backward runs once per output state: ``tape.backward(grads={states[k]: ones})``, the parameter
gradient is read (a row of d states / d theta), and the gradients are cleared before the next
output, exactly as the seed's loop did. The runner reads the gradient of the last output, whose
sum is the loss ``forward()`` returns (so finite differences compare the same quantity).

Why it matters: before Warp 1.6.0 ``tape.backward(grads=...)`` put the seeded arrays in
``tape.const_gradients`` and ``tape.zero()`` skipped them. Their stale gradients then fed every later
backward: per-output gradients came out wrong within a pass ([3, 8, 15.75, 27.5] instead of
[3, 5, 6.25, 7] in the seed) and grew across passes. Fault:
- ``per-output-backward``: clear with ``tape.zero()`` alone between outputs (the seed's loop): wrong on
  Warp < 1.6.0 (accumulation, zero-audit naming the ``grads=`` arrays); correct on later versions.
The clean variant also zeroes the seeded arrays' gradients by hand, the workaround that is right on
every version.
"""

from __future__ import annotations

import warp as wp

from gradcheck.scenarios._options import positive, whole

N = 4


@wp.kernel
def step(x: wp.array(dtype=float), theta: wp.array(dtype=float), dt: float, y: wp.array(dtype=float)):
    i = wp.tid()
    v = x[i]
    y[i] = v + dt * (theta[i] * v - v * v * v)


@wp.kernel
def total(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i])


class Rollout:
    name = "rollout"
    description = "Pure-Warp rollout with one tape.backward(grads=...) per output state (warp#407 usage)"
    faults = {
        "per-output-backward": "tape.zero() alone between per-output backward calls: Warp < 1.6.0 keeps the grads= seeds (warp#407)",
    }

    def setup(self, device, fault=None, steps="4", dt="0.1"):
        self.fault = fault
        self.steps, self.dt = whole("steps", steps), positive("dt", dt)
        self.theta = wp.array([0.5 + 0.25 * i for i in range(N)], dtype=float, device=device, requires_grad=True)
        x0 = [1.0 - 0.1 * i for i in range(N)]
        self.states = [wp.array(x0, dtype=float, device=device, requires_grad=True)]
        self.states += [wp.zeros(N, dtype=float, device=device, requires_grad=True) for _ in range(self.steps)]
        self.seed = wp.ones(N, dtype=float, device=device)
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)
        self.rows: list = []  # d sum(states[k]) / d theta for k = 1..steps, read during backward

    def params(self):
        return {"theta": self.theta}

    def forward(self):
        for k in range(self.steps):
            wp.launch(step, dim=N, inputs=[self.states[k], self.theta, self.dt], outputs=[self.states[k + 1]])
        self.loss.zero_()
        wp.launch(total, dim=N, inputs=[self.states[-1]], outputs=[self.loss])
        return self.loss

    def backward(self, tape, loss):
        self.rows = []
        for k in range(1, self.steps + 1):
            if k > 1:
                self.zero(tape)
            tape.backward(grads={self.states[k]: self.seed})
            self.rows.append(self.theta.grad.numpy().copy())  # copy: numpy() is a view on CPU

    def zero(self, tape):
        tape.zero()
        if self.fault != "per-output-backward":
            for state in self.states[1:]:  # the grads= targets: Warp < 1.6.0's tape.zero() skips them
                state.grad.zero_()


scenario = Rollout
