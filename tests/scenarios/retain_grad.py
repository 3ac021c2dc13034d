"""Test scenario: an intermediate allocated with ``retain_grad=True`` keeps its gradient.

loss = sum((x*x)^2), with y = x*x held in a retain_grad array. Since Warp 1.13 a plain store's
adjoint consumes ``y.grad``, unless the array retains it: then a second backward without a zero
step adds to the old value. Faults:
- ``no-zero``: nothing is cleared between passes → x.grad grows 1, 3, 6, 10 … (superlinear)
- ``params-only``: x.grad is zeroed by hand, y.grad is not → x.grad grows 1, 2, 3 … (linear)
"""

import warp as wp


@wp.kernel
def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel
def sum_of_squares(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i] * y[i])


class RetainGrad:
    name = "retain-grad"
    description = "x -> y=x*x (retain_grad) -> loss=sum(y*y); tests accumulation shapes"
    faults = {
        "no-zero": "no zero step at all: param and intermediate gradients pile up (superlinear)",
        "params-only": "only x.grad is zeroed by hand; the retained y.grad accumulates (linear)",
    }

    def setup(self, device, fault=None, n="4"):
        self.fault = fault
        n = int(n)
        self.x = wp.array([0.5 + 0.25 * i for i in range(n)], dtype=float, device=device, requires_grad=True)
        self.y = wp.zeros(n, dtype=float, device=device, requires_grad=True, retain_grad=True)
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)

    def params(self):
        return {"x": self.x}

    def forward(self):
        self.loss.zero_()
        wp.launch(square, dim=self.x.shape[0], inputs=[self.x], outputs=[self.y])
        wp.launch(sum_of_squares, dim=self.y.shape[0], inputs=[self.y], outputs=[self.loss])
        return self.loss

    def zero(self, tape):
        if self.fault == "no-zero":
            return
        if self.fault == "params-only":
            self.x.grad.zero_()
            return
        tape.zero()


scenario = RetainGrad
