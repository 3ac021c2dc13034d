"""NVIDIA's Accelerated Computing Hub Warp tutorial solver: optimise the initial vorticity of a 256x256 2-D
Navier-Stokes flow (FFT Poisson solves in tile kernels, SSP-RK3) so that it matches a target image after 2 steps.

Third-party code audited: ``VorticityInverseSolver`` from ``tutorials/warp/notebooks/helpers/
differentiable_navier_stokes/logo_solver.py`` of https://github.com/NVIDIA/accelerated-computing-hub (code under
Apache-2.0, LICENSE-CODE; snapshot commit a776efdfc2fba159a0aecced3e7c0dfafaf81b8b), which the tutorial notebook
``04__differentiable_navier_stokes_solver.ipynb`` drives: one ``wp.Tape`` per training step over the whole rollout,
``tape.backward(loss)``, warp.optim.Adam on a flattened view of the initial vorticity, ``tape.zero()``. Each Poisson
solve reuses its FFT scratch arrays for the forward and the inverse transform (both linear). The module is not on
PyPI: tests/test_thirdparty.py says where it must be unpacked; it is not copied into this repository.

This driver is ours, after the notebook's training cell; what differs from the notebook, so that it runs headless on
a CPU in seconds: the device is the CPU; 2 lead steps instead of 80 and 3 optimizer steps instead of 100; the target
image is a ring this driver draws (the notebook's gtc_logo.png is a Git LFS object the snapshot lacks); blur_sigma
0 (the solver imports scipy for the blur either way); no GIF; it prints each step's loss and the final parameter sum.
"""

import os
import tempfile

import numpy as np
import warp as wp
from PIL import Image

wp.init()
wp.set_device("cpu")

from helpers.differentiable_navier_stokes.logo_solver import VorticityInverseSolver  # noqa: E402

LEAD_STEPS = 2
OPTIMIZER_STEPS = 3


def ring_image(size: int = 64) -> str:
    """A white ring on black, as a PNG in a temporary folder: the solver maps grey levels to vorticity."""
    y, x = np.mgrid[0:size, 0:size]
    radius = np.hypot(x - size / 2, y - size / 2)
    path = os.path.join(tempfile.mkdtemp(), "ring.png")
    Image.fromarray(((np.abs(radius - 0.28 * size) < 0.08 * size) * 255).astype(np.uint8)).save(path)
    return path


example = VorticityInverseSolver(target_image_path=ring_image(), lead_steps=LEAD_STEPS, blur_sigma=0.0)
for i in range(OPTIMIZER_STEPS):
    print(f"iter {i}: loss {example.train_step(LEAD_STEPS):.6g}")
omega = example.omega_init.numpy().astype(np.float64)
print(f"omega_init: sum {omega.sum():.6g}, |sum| {np.abs(omega).sum():.6g}")
