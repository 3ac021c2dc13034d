"""Test scenario: a hard-edged 1-D renderer whose finite differences scatter with the step; the ``wrong-sign``
fault flips the custom adjoint of its smooth shading term.

loss(x) = -25 x + sum of the values of the pixels the object at x has passed (x > edge). The coverage is
piecewise constant, so the true derivative at x = 1 (no edge there) is -25 and the tape's is -25; central
differences also count the edges within the step (value / (2 eps)), as a ray tracer's do across pixel edges
(Warp's example_diffray: tape +39.6, FD -34.5 / -19.2 / -30.5 / -22.8). The edges are placed so that at the
steps of the judge's ladder they give -25 (3e-4), -24 (1e-3), -26 (3e-3), -25 (1e-2: the edges inside cancel, so
the first step agrees with a right tape), -30 (3e-2), -19 (1e-1), -34.5 (3e-1): no three neighbouring steps agree,
every one is negative. With the fault the tape says +25: wrong, and only the one-sidedness of the evidence shows it.
"""

import warp as wp

SLOPE = -25.0
# (offset from x = 1, value) of each edge; none within ±4.5e-4, where the noise is measured
EDGES = ((6e-4, 2e-3), (-2e-3, -8e-3), (6e-3, 6e-3), (-2e-2, -0.3), (6e-2, 1.5), (-0.2, -6.9))


@wp.func
def shade(x: float):
    return SLOPE * x


@wp.func_grad(shade)
def adj_shade(x: float, adj_ret: float):
    wp.adjoint[x] += SLOPE * adj_ret


@wp.func
def shade_wrong(x: float):
    return SLOPE * x


@wp.func_grad(shade_wrong)
def adj_shade_wrong(x: float, adj_ret: float):
    wp.adjoint[x] += -SLOPE * adj_ret  # the sign lost


@wp.kernel
def render(
    x: wp.array(dtype=float), edges: wp.array(dtype=float), values: wp.array(dtype=float), loss: wp.array(dtype=float)
):
    i = wp.tid()
    if i == 0:
        wp.atomic_add(loss, 0, shade(x[0]))
    if x[0] > edges[i]:
        wp.atomic_add(loss, 0, values[i])


@wp.kernel
def render_wrong(
    x: wp.array(dtype=float), edges: wp.array(dtype=float), values: wp.array(dtype=float), loss: wp.array(dtype=float)
):
    i = wp.tid()
    if i == 0:
        wp.atomic_add(loss, 0, shade_wrong(x[0]))
    if x[0] > edges[i]:
        wp.atomic_add(loss, 0, values[i])


class OneSided:
    name = "one-sided"
    description = "hard pixel edges scatter finite differences; the wrong-sign fault flips the shading adjoint"
    faults = {"wrong-sign": "the custom adjoint of the shading term has the wrong sign (tape +25, truth -25)"}

    def setup(self, device, fault=None):
        self.kernel = render_wrong if fault == "wrong-sign" else render
        self.x = wp.array([1.0], dtype=float, device=device, requires_grad=True)
        self.edges = wp.array([1.0 + d for d, _ in EDGES], dtype=float, device=device)
        self.values = wp.array([v for _, v in EDGES], dtype=float, device=device)
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)

    def params(self):
        return {"x": self.x}

    def forward(self):
        self.loss.zero_()
        wp.launch(self.kernel, dim=len(EDGES), inputs=[self.x, self.edges, self.values], outputs=[self.loss])
        return self.loss


scenario = OneSided
