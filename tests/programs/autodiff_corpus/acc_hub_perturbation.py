"""NVIDIA's Accelerated Computing Hub optimal-perturbation solver: find the vorticity perturbation of a 2-D decaying
turbulence (512x512, FFT Poisson solves in tile kernels, SSP-RK3) that most changes the flow after the lead time.

Program under test, vendored unmodified in tests/corpus/autodiff/acc_hub_navier_stokes/ (README there: source,
commit, Apache-2.0): ``OptimalPerturbationSolver`` of ``helpers/differentiable_navier_stokes/perturbation_solver.py``.
Each Poisson solve gets its own ``PoissonFFTBuffers`` struct of complex scratch arrays (a ``@wp.struct`` passed to
the tile-FFT kernels); one ``wp.Tape`` per step over the rollout, ``warp.optim.Adam`` on the flattened perturbation,
then a norm clamp outside the tape and ``tape.zero()``. This driver (ours, after the tutorial's notebook) only
chooses sizes so that it runs on a CPU in seconds: 2 spin-up steps instead of 500, 1 lead step instead of 80,
3 optimizer steps; the grid is the module's constant (512).
"""

import numpy as np
import warp as wp

wp.init()
wp.set_device("cpu")

from helpers.differentiable_navier_stokes.perturbation_solver import OptimalPerturbationSolver  # noqa: E402

SPIN_UP, LEAD, OPTIMIZER_STEPS = 2, 1, 3


def build():
    """The solver at its initial perturbation; ``forward()`` writes ``loss``, the param is ``delta_omega``."""
    np.random.seed(11)
    return OptimalPerturbationSolver(spin_up_steps=SPIN_UP, lead_steps=LEAD)


if __name__ == "__main__":
    solver = build()
    for i in range(OPTIMIZER_STEPS):
        print(f"iter {i}: loss {solver.train_step():.6g}")
    delta = solver.delta_omega.numpy().astype(np.float64)
    print(f"delta_omega: sum {delta.sum():.6g}, |sum| {np.abs(delta).sum():.6g}")
