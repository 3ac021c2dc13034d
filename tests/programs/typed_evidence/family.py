"""A family of params (``w[0]`` … ``w[3]``) and four scratch buffers between them and the loss, for the typed
evidence tests (tests/test_typed_evidence.py): run as a scenario (``gradcheck run family.py --fault no-zero``) and
as a plain script (``gradcheck exec family.py --no-zero``), the same mistake under both drivers.

loss = sum_i sum_j (s_i w_i[j])^2 through one scratch buffer per param group, each scaled differently, so the
members of a family and the scratch buffers have different gradient norms (the table ranks them worst first).
"""

import argparse

import warp as wp

N = 4
SCALES = (0.5, 1.0, 2.0, 4.0)


@wp.kernel
def scale_into(w: wp.array(dtype=float), s: float, out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = s * w[i]


@wp.kernel
def square_sum(h: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, h[i] * h[i])


@wp.kernel
def sgd(w: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    w[i] = w[i] - lr * g[i]


class Problem:
    def __init__(self, device=None):
        self.device = device
        self.w = [wp.full(N, 1.0 + 0.1 * i, dtype=float, device=device, requires_grad=True) for i in range(4)]
        self.scratch_a = wp.zeros(N, dtype=float, device=device, requires_grad=True)
        self.scratch_b = wp.zeros(N, dtype=float, device=device, requires_grad=True)
        self.scratch_c = wp.zeros(N, dtype=float, device=device, requires_grad=True)
        self.scratch_d = wp.zeros(N, dtype=float, device=device, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)

    def forward(self):
        self.loss.zero_()
        scratch = (self.scratch_a, self.scratch_b, self.scratch_c, self.scratch_d)
        for w, s, h in zip(self.w, SCALES, scratch):
            wp.launch(scale_into, dim=N, inputs=[w, s], outputs=[h], device=self.device)
            wp.launch(square_sum, dim=N, inputs=[h], outputs=[self.loss], device=self.device)
        return self.loss


class Family:
    name = "typed-evidence-family"
    description = "a param family w[0..3] through scratch buffers (tests/test_typed_evidence.py)"
    faults = {"no-zero": "nothing clears the gradients between passes", "params-only": "only w[i].grad cleared"}

    def setup(self, device, fault=None, names="family"):
        self.fault = fault
        self.p = Problem(device)
        self.names = names  # family: w[0] … w[3]; apart: wa … wd, one finding each (a group of the table)

    def params(self):
        if self.names == "apart":
            return {f"w{'abcd'[i]}": w for i, w in enumerate(self.p.w)}
        return {f"w[{i}]": w for i, w in enumerate(self.p.w)}

    def forward(self):
        return self.p.forward()

    def zero(self, tape):
        if self.fault == "no-zero":
            return
        if self.fault == "params-only":
            for w in self.p.w:
                w.grad.zero_()
            return
        tape.zero()


scenario = Family


if __name__ == "__main__":  # the same mistake as a plain training loop
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-zero", action="store_true")
    parser.add_argument("--iterations", type=int, default=3)
    options = parser.parse_args()
    p = Problem()
    w = p.w
    for _iteration in range(options.iterations):
        tape = wp.Tape()
        with tape:
            loss = p.forward()
        tape.backward(loss)
        for param in w:  # one SGD step
            wp.launch(sgd, dim=N, inputs=[param, param.grad, 0.01])
        if not options.no_zero:
            tape.zero()
    print("loss", float(loss.numpy()[0]))
