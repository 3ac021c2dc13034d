"""Test scenario: an integrator that updates its state in place through ``inputs=``.

``integrate(x, v, k, dt)`` writes x and v although they are passed as inputs, as Warp's own
``examples/optim/example_particle_repulsion.py`` does: the inputs/outputs split is a convention, not a
contract. Backward then replays every step from the last step's x and v, so the gradient of the spring
constants is wrong. Clean variant: one array per step, written through ``outputs=``.
"""

import warp as wp

N = 4


@wp.kernel
def reset(x0: wp.array(dtype=float), v0: wp.array(dtype=float), x: wp.array(dtype=float), v: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = x0[i]
    v[i] = v0[i]


@wp.kernel
def integrate(x: wp.array(dtype=float), v: wp.array(dtype=float), k: wp.array(dtype=float), dt: float):
    i = wp.tid()
    v[i] = v[i] - dt * k[i] * x[i]
    x[i] = x[i] + dt * v[i]


@wp.kernel
def integrate_to(
    x: wp.array(dtype=float),
    v: wp.array(dtype=float),
    k: wp.array(dtype=float),
    dt: float,
    x_out: wp.array(dtype=float),
    v_out: wp.array(dtype=float),
):
    i = wp.tid()
    v_out[i] = v[i] - dt * k[i] * x[i]
    x_out[i] = x[i] + dt * v_out[i]


@wp.kernel
def energy(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


class InPlace:
    name = "in-place"
    description = "spring integrator; the fault updates x and v in place through inputs="
    faults = {"inputs-written": "integrate(x, v, ...) writes x and v passed in inputs=: backward replays later values"}

    def setup(self, device, fault=None, steps="8"):
        self.fault, self.steps, self.dt = fault, int(steps), 0.1
        self.k = wp.array([1.0, 2.0, 3.0, 4.0], dtype=float, device=device, requires_grad=True)
        self.x0 = wp.array([1.0, 0.5, -0.5, 0.25], dtype=float, device=device, requires_grad=True)
        self.v0 = wp.zeros(N, dtype=float, device=device, requires_grad=True)
        count = 1 if fault == "inputs-written" else self.steps + 1
        self.xs = [wp.zeros(N, dtype=float, device=device, requires_grad=True) for _ in range(count)]
        self.vs = [wp.zeros(N, dtype=float, device=device, requires_grad=True) for _ in range(count)]
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)

    def params(self):
        return {"k": self.k}

    def forward(self):
        wp.launch(reset, dim=N, inputs=[self.x0, self.v0], outputs=[self.xs[0], self.vs[0]])
        for t in range(self.steps):
            if self.fault == "inputs-written":
                wp.launch(integrate, dim=N, inputs=[self.xs[0], self.vs[0], self.k, self.dt])
            else:
                args = [self.xs[t], self.vs[t], self.k, self.dt]
                wp.launch(integrate_to, dim=N, inputs=args, outputs=[self.xs[t + 1], self.vs[t + 1]])
        self.loss.zero_()
        wp.launch(energy, dim=N, inputs=[self.xs[-1]], outputs=[self.loss])
        return self.loss


scenario = InPlace
