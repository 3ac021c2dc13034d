"""Train cartpole's controls and initial state with plain SGD through Newton's SolverFeatherstone: a training script
that uses no gradcheck API (the scenario module only builds the model). ``STEPS`` (30) and ``SCRATCH`` (per-step, or
shared: stock Newton) as positional arguments. tests/test_kernel_tests.py runs it under exec's default adjoint test:
the Cholesky's no-op adjoint, split with the solve's, must never be an error."""

import sys

import warp as wp

from gradcheck.scenarios.cartpole import CartPole


@wp.kernel
def sgd(x: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * g[i]


def main(steps: str, scratch: str) -> None:
    scenario = CartPole()
    scenario.setup("cpu", steps=steps, scratch=scratch)
    params = scenario.params()
    for _ in range(4):
        tape = wp.Tape()
        with tape:
            loss = scenario.forward()
        tape.backward(loss)
        for p in params.values():
            flat, grad = (p.flatten(), p.grad.flatten()) if p.ndim > 1 else (p, p.grad)
            wp.launch(sgd, dim=p.size, inputs=[flat, grad, 1e-3])
        print("loss", float(loss.numpy()[0]))
        tape.zero()


if __name__ == "__main__":
    main(*(sys.argv[1:3] + ["30", "per-step"][len(sys.argv[1:3]) :]))
