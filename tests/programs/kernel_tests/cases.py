"""Small programs for exec's default adjoint test (tests/test_kernel_tests.py), one per ``--case``:

- ``copy``: square -> wp.copy -> total; the copy on the tape joins the two kernels (both must be tested);
- ``view``: square -> total reading ``y.reshape(...)``: a view is the array it views (both tested);
- ``two-seeds``: one backward seeded on two outputs (``grads={a: ..., b: ...}``), each written by its own kernel;
- ``custom-one-shot``: a kernel calling a @wp.func whose @wp.func_grad is not its derivative, one backward and
  nothing updated (a test of the mechanism, a Jacobian probe): no verdict, an info at most;
- ``custom-trained``: the same adjoint in a training loop that learns from it: an error;
- ``straight-through``: a rounding forward (flat) whose @wp.func_grad passes the gradient through, in a training loop:
  a surrogate gradient, an info at most;
- ``clean-trained``: the @wp.func_grad that is the derivative, in the training loop: silent;
- ``flat-float32``: a world offset of 1e6 added to a local 1e-3 and cancelled (``(big + x) - big``): right in real
  arithmetic, flat in float32, so central differences of the launch see nothing where the adjoint does: no verdict;
- ``ste-plus-reg``, ``reversal``: surrogates a training loop learns from (a straight-through rounding beside a smooth
  regulariser in one kernel; a gradient reversal scaled by 0.1): an info at most;
- ``host-trained``: the wrong @wp.func_grad of ``custom-trained``, the params updated on the host
  (``x.assign(x.numpy() - lr * x.grad.numpy())``): trained all the same, an error;
- ``accumulate``: two launches adding into one output (``acc[i] += ...``), then the loss: both tested;
- ``hand-seeded``: ``y.grad.fill_(1.0)`` then ``tape.backward()`` with no loss: the seeded array is the loss;
- ``eval-first``: two tapes recorded for evaluation and never differentiated, then training: its kernels are still
  tested (on the training tape), and the dropped recordings are let go.
"""

import argparse

import numpy as np
import warp as wp


@wp.func
def cube(x: float):
    return x * x * x


@wp.func_grad(cube)
def adj_cube_wrong(x: float, adj_ret: float):
    wp.adjoint[x] += 2.0 * x * adj_ret  # not 3 x^2


@wp.func
def cube_right(x: float):
    return x * x * x


@wp.func_grad(cube_right)
def adj_cube_right(x: float, adj_ret: float):
    wp.adjoint[x] += 3.0 * x * x * adj_ret


@wp.func
def rounded(x: float):
    return wp.floor(x * 4.0) / 4.0


@wp.func_grad(rounded)
def adj_rounded(x: float, adj_ret: float):
    wp.adjoint[x] += adj_ret  # straight through


@wp.kernel
def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel
def total(z: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, z[i])


@wp.kernel
def total_2d(z: wp.array2d(dtype=float), loss: wp.array(dtype=float)):
    i, j = wp.tid()
    wp.atomic_add(loss, 0, z[i, j] * z[i, j])


@wp.kernel
def sine(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.sin(x[i])


@wp.kernel
def apply_cube(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = cube(x[i])


@wp.kernel
def apply_cube_right(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = cube_right(x[i])


@wp.kernel
def apply_rounded(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = rounded(x[i])


@wp.kernel
def sq_error(y: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = y[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.func
def reverse(x: float):
    return x


@wp.func_grad(reverse)
def adj_reverse(x: float, adj_ret: float):
    wp.adjoint[x] += -0.1 * adj_ret  # gradient reversal, scaled


@wp.kernel
def offset_cancelled(x: wp.array(dtype=float), big: float, y: wp.array(dtype=float)):
    i = wp.tid()
    p = big + x[i]
    y[i] = (p - big) * 1.0e3 + x[i] * big * 1.0e-6


@wp.kernel
def ste_plus_reg(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = rounded(x[i]) + 0.01 * x[i] * x[i]


@wp.kernel
def apply_reverse(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = reverse(x[i])


@wp.kernel
def accumulate(x: wp.array(dtype=float), s: float, acc: wp.array(dtype=float)):
    i = wp.tid()
    acc[i] += s * x[i] * x[i]


@wp.kernel
def looped(x: wp.array(dtype=float), n: int, y: wp.array(dtype=float)):
    """A loop whose trip count is an argument (tests/test_kernel_tests.py reads its bound, never launches it)."""
    i = wp.tid()
    acc = float(0.0)  # noqa: UP018 - a dynamic loop cannot mutate a literal constant
    for _k in range(n):
        acc += x[i]
    y[i] = acc


@wp.kernel
def sgd(x: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * g[i]


def train(forward, x, iterations: int, lr: float = 0.01, on_host: bool = False) -> None:
    for _ in range(iterations):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            forward(loss)
        tape.backward(loss)
        if on_host:
            x.assign(x.numpy() - lr * x.grad.numpy())
        else:
            wp.launch(sgd, dim=x.size, inputs=[x, x.grad, lr])
        print(f"loss {loss.numpy()[0]:.6f}")
        tape.zero()


def main(case: str, iterations: int) -> None:
    wp.init()
    n = 8
    x = wp.array(np.linspace(0.3, 1.1, n).astype(np.float32), requires_grad=True)
    y = wp.zeros(n, dtype=float, requires_grad=True)
    target = wp.array(np.full(n, 0.5, dtype=np.float32))
    if case == "copy":
        z = wp.zeros(n, dtype=float, requires_grad=True)

        def forward(loss):
            wp.launch(square, dim=n, inputs=[x], outputs=[y])
            wp.copy(z, y)
            wp.launch(total, dim=n, inputs=[z], outputs=[loss])

        train(forward, x, iterations)
    elif case == "view":

        def forward(loss):
            wp.launch(square, dim=n, inputs=[x], outputs=[y])
            wp.launch(total_2d, dim=(2, n // 2), inputs=[y.reshape((2, n // 2))], outputs=[loss])

        train(forward, x, iterations)
    elif case == "two-seeds":
        a = wp.zeros(n, dtype=float, requires_grad=True)
        b = wp.zeros(n, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(square, dim=n, inputs=[x], outputs=[a])
            wp.launch(sine, dim=n, inputs=[x], outputs=[b])
        tape.backward(grads={a: wp.ones(n, dtype=float), b: wp.ones(n, dtype=float)})
        print("x.grad", np.round(x.grad.numpy(), 4))
    elif case == "custom-one-shot":
        tape = wp.Tape()
        with tape:
            wp.launch(apply_cube, dim=n, inputs=[x], outputs=[y])
        tape.backward(grads={y: wp.ones(n, dtype=float)})
        print("x.grad", np.round(x.grad.numpy(), 4))
    elif case == "flat-float32":
        x.assign(np.linspace(1e-3, 2e-3, n).astype(np.float32))

        def forward(loss):
            wp.launch(offset_cancelled, dim=n, inputs=[x, 1.0e6], outputs=[y])
            wp.launch(total, dim=n, inputs=[y], outputs=[loss])

        train(forward, x, iterations, lr=1e-9)
    elif case == "accumulate":
        acc = wp.zeros(n, dtype=float, requires_grad=True)

        def forward(loss):
            acc.zero_()
            wp.launch(accumulate, dim=n, inputs=[x, 1.0], outputs=[acc])
            wp.launch(accumulate, dim=n, inputs=[x, 2.0], outputs=[acc])
            wp.launch(total, dim=n, inputs=[acc], outputs=[loss])

        train(forward, x, iterations)
    elif case == "hand-seeded":
        tape = wp.Tape()
        with tape:
            wp.launch(sine, dim=n, inputs=[x], outputs=[y])
        y.grad.fill_(1.0)
        tape.backward()
        print("x.grad", np.round(x.grad.numpy(), 4))
    elif case == "eval-first":
        for _ in range(2):
            evaluation = wp.Tape()  # recorded, never differentiated
            with evaluation:
                wp.launch(square, dim=n, inputs=[x], outputs=[y])

        def forward(loss):
            wp.launch(square, dim=n, inputs=[x], outputs=[y])
            wp.launch(total, dim=n, inputs=[y], outputs=[loss])

        train(forward, x, iterations)
    else:
        kernel = {
            "custom-trained": apply_cube, "host-trained": apply_cube, "straight-through": apply_rounded,
            "clean-trained": apply_cube_right, "ste-plus-reg": ste_plus_reg, "reversal": apply_reverse,
        }  # fmt: skip

        def forward(loss):
            wp.launch(kernel[case], dim=n, inputs=[x], outputs=[y])
            wp.launch(sq_error, dim=n, inputs=[y, target], outputs=[loss])

        train(forward, x, iterations, on_host=case == "host-trained")


CASES = (
    "copy", "view", "two-seeds", "custom-one-shot", "custom-trained", "straight-through", "clean-trained", "eval-first",
    "flat-float32", "ste-plus-reg", "reversal", "host-trained", "accumulate", "hand-seeded",
)  # fmt: skip

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--case", choices=CASES, required=True)
    parser.add_argument("--iterations", type=int, default=3)
    args = parser.parse_args()
    main(args.case, args.iterations)
