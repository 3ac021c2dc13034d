"""Test scenario: a ``@wp.func_grad`` custom adjoint; the ``wrong-adjoint`` fault doubles one component.

energy(v) = v.x^2 + v.y^2 * v.z + v.z; the wrong adjoint returns 2x the true dE/dv.y.
"""

import warp as wp


@wp.func
def energy(v: wp.vec3):
    return v[0] * v[0] + v[1] * v[1] * v[2] + v[2]


@wp.func_grad(energy)
def adj_energy(v: wp.vec3, adj_ret: float):
    wp.adjoint[v] += wp.vec3(2.0 * v[0], 2.0 * v[1] * v[2], v[1] * v[1] + 1.0) * adj_ret


@wp.func
def energy_wrong(v: wp.vec3):
    return v[0] * v[0] + v[1] * v[1] * v[2] + v[2]


@wp.func_grad(energy_wrong)
def adj_energy_wrong(v: wp.vec3, adj_ret: float):
    wp.adjoint[v] += wp.vec3(2.0 * v[0], 4.0 * v[1] * v[2], v[1] * v[1] + 1.0) * adj_ret  # y: 2x too large


@wp.kernel
def total(x: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, energy(x[i]))


@wp.kernel
def total_wrong(x: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, energy_wrong(x[i]))


class CustomAdjoint:
    name = "custom-adjoint"
    description = "custom @wp.func_grad; the wrong-adjoint fault doubles the y component"
    faults = {"wrong-adjoint": "the custom adjoint returns 2x the true dE/dv.y"}

    def setup(self, device, fault=None):
        self.kernel = total_wrong if fault == "wrong-adjoint" else total
        self.x = wp.array(
            [(0.5 + i, 1.0 + 0.5 * i, 2.0 - 0.25 * i) for i in range(4)],
            dtype=wp.vec3,
            device=device,
            requires_grad=True,
        )
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)

    def params(self):
        return {"x": self.x}

    def forward(self):
        self.loss.zero_()
        wp.launch(self.kernel, dim=4, inputs=[self.x], outputs=[self.loss])
        return self.loss


scenario = CustomAdjoint
