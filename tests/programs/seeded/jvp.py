"""A one-shot vector-Jacobian product: no scalar loss, backward seeded on the output with ``grads=``, the gradients
printed and nothing updated (each array is a leaf). ``--case`` picks the mistake:

- ``cusp``: y0 = -x - sqrt(|x - c|) at x = c: forward finite, x.grad -inf from backward alone;
- ``loop``: y1 = (sum b)^2 over a runtime-bound loop: b.grad exactly 0 where central differences give 2;
- ``unconnected``: w is read by a launch on the tape whose output nothing seeded depends on (w.grad 0, rightly);
- ``forward-nan``: c is NaN, so the forward output itself is NaN (and so is x.grad);
- ``clean``: the guarded cusp and the constant-trip-count loop: every gradient finite and as central differences say.
"""

import argparse

import warp as wp
from seeded_kernels import cusp, scale, square_of_sum, square_of_sum_fixed

CASES = ("clean", "cusp", "loop", "unconnected", "forward-nan")


def main(case: str) -> None:
    wp.init()
    x = wp.array([1.0], dtype=float, requires_grad=True)
    b = wp.array([1.0, 0.0, 0.0, 0.0], dtype=float, requires_grad=True)
    y = wp.zeros(2, dtype=float, requires_grad=True)
    c = {"forward-nan": float("nan")}.get(case, 1.0)
    tape = wp.Tape()
    with tape:
        wp.launch(cusp, dim=1, inputs=[x, c, int(case != "cusp" and case != "forward-nan")], outputs=[y])
        loop = square_of_sum if case == "loop" else square_of_sum_fixed
        wp.launch(loop, dim=1, inputs=[b, 1], outputs=[y[1:]])
        if case == "unconnected":
            w = wp.array([1.0, 2.0], dtype=float, requires_grad=True)
            z = wp.zeros(2, dtype=float, requires_grad=True)
            wp.launch(scale, dim=2, inputs=[w], outputs=[z])
    tape.backward(grads={y: wp.array([1.0, 1.0], dtype=float)})
    print("y", y.numpy(), "x.grad", x.grad.numpy(), "b.grad", b.grad.numpy())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--case", choices=CASES, default="clean")
    main(parser.parse_args().case)
