"""A scenario with one 16,777,216-float param and a trivial loss (sum of w * x): what gradcheck's per-pass
bookkeeping costs when a gradient is large (BENCHMARKS.md P6)."""

import warp as wp

N = 1 << 24


@wp.kernel
def weighted_sum(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * 0.001 * float(i % 7))


class LargeParam:
    name = "large-param"
    description = "one 16M-float param, loss = sum(w * x)"

    def setup(self, device, fault=None):
        self.x = wp.full(N, 1.0, dtype=float, device=device, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)

    def params(self):
        return {"x": self.x}

    def forward(self):
        self.loss.zero_()
        wp.launch(weighted_sum, dim=N, inputs=[self.x], outputs=[self.loss])
        return self.loss


scenario = LargeParam
