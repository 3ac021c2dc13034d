"""The vanishing corpus: a gated line fit with a drag term, and a float64 offset that converges to its optimum.

``Fit``: y_i = sigmoid(layer.bias) * layer.weight * x_i + units * drag * v_i, loss = sum 0.5 (y_i - t_i)^2.
- ``drag`` is a coefficient given in its units: 1e-3 (right) or 1e-12 (``drag-units``, the mistake): its gradient
  is then 1e-12-scaled from the first backward on and the loss cannot see it, however long the loop trains;
- ``layer.bias`` opens a gate that sits saturated (sigmoid(25) = 1 in float32, derivative 1.4e-11): its gradient is
  as small as the mistaken drag's, but it is one param of a layer whose weight trains (not a finding).
``Offset``: a float64 offset fitted to the targets -0.1 and 0.1: loss = offset^2 + 0.01, gradient 2 * offset; an
SGD step of 0.495 shrinks it 100-fold per iteration, so from 1 its gradient falls to 2e-10 as the loss reaches its
floor of 0.01: a param converging, the false warning of issue 39.
"""

import numpy as np
import warp as wp

UNITS = {"clean": 1e-3, "drag-units": 1e-12}
MISTAKES = {"drag-units": "the drag coefficient in the wrong units (1e-12 instead of 1e-3): its gradient vanishes"}


@wp.kernel
def fit_loss(
    weight: wp.array(dtype=float),
    bias: wp.array(dtype=float),
    drag: wp.array(dtype=float),
    units: float,
    x: wp.array(dtype=float),
    v: wp.array(dtype=float),
    t: wp.array(dtype=float),
    loss: wp.array(dtype=float),
):
    i = wp.tid()
    gate = 1.0 / (1.0 + wp.exp(-bias[0]))
    r = gate * weight[0] * x[i] + units * drag[0] * v[i] - t[i]
    wp.atomic_add(loss, 0, 0.5 * r * r)


@wp.kernel
def offset_loss(offset: wp.array(dtype=wp.float64), t: wp.array(dtype=wp.float64), loss: wp.array(dtype=wp.float64)):
    i = wp.tid()
    r = offset[0] - t[i]
    wp.atomic_add(loss, 0, wp.float64(0.5) * r * r)


@wp.kernel
def sgd(p: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


@wp.kernel
def sgd64(p: wp.array(dtype=wp.float64), g: wp.array(dtype=wp.float64), lr: wp.float64):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


class GatedLayer:
    def __init__(self, device):
        self.weight = wp.array([0.5], dtype=float, device=device, requires_grad=True)
        self.bias = wp.array([25.0], dtype=float, device=device, requires_grad=True)  # the gate, saturated open


class Fit:
    LR = 0.05

    def __init__(self, device=None, mistake="clean"):
        self.units = UNITS[mistake]
        self.layer = GatedLayer(device)
        self.drag = wp.array([2.0], dtype=float, device=device, requires_grad=True)
        x = np.linspace(-1.0, 1.0, 8)
        self.x = wp.array(x, dtype=float, device=device)
        self.v = wp.array(np.cos(3.0 * x), dtype=float, device=device)
        self.t = wp.array(1.5 * x + 0.3, dtype=float, device=device)
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)

    def params(self):
        return {"weight": self.layer.weight, "bias": self.layer.bias, "drag": self.drag}

    def forward(self):
        self.loss.zero_()
        inputs = [self.layer.weight, self.layer.bias, self.drag, self.units, self.x, self.v, self.t]
        wp.launch(fit_loss, dim=self.x.shape[0], inputs=inputs, outputs=[self.loss])
        return self.loss

    def step(self):
        for p in self.params().values():
            wp.launch(sgd, dim=p.shape[0], inputs=[p, p.grad, self.LR])


class Offset:
    LR = 0.495

    def __init__(self, device=None):
        self.offset = wp.array([1.0], dtype=wp.float64, device=device, requires_grad=True)
        self.t = wp.array([-0.1, 0.1], dtype=wp.float64, device=device)
        self.loss = wp.zeros(1, dtype=wp.float64, device=device, requires_grad=True)

    def forward(self):
        self.loss.zero_()
        wp.launch(offset_loss, dim=2, inputs=[self.offset, self.t], outputs=[self.loss])
        return self.loss

    def step(self):
        wp.launch(sgd64, dim=1, inputs=[self.offset, self.offset.grad, wp.float64(self.LR)])
