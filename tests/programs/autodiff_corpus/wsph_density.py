"""warpSPHCore (PyPI ``warpsphcore`` 0.6.0, MIT): fit jittered SPH particle positions and masses to a target density
field through the package's differentiable density operator.

Program under test: the pinned package (``.venv-thirdparty``, the Makefile's ``THIRDPARTY_PACKAGES``), run by the
PyTorch lane's interpreter (``.venv-torch``: warpSPHCore bridges Warp and torch). ``warpOperation`` builds the
compact-hash neighbourhood, packs the particles into a ``particleDataSoA_2`` ``@wp.struct`` (positions, supports,
masses, densities, kinds as fields) and launches ``computeSPHDensity_Kernel`` with that struct instance as its query
and reference arguments inside its own ``wp.Tape`` (``WarpFunctionWrapper``, a ``torch.autograd.Function``); torch's
``backward`` runs that tape. The neighbour loop's trip count is read at run time from the adjacency.
This driver (ours, after the package README's quickstart) only chooses sizes, the CPU and 3 Adam steps.
"""

import torch
import warp as wp
import warpSPHCore as sph
from warpSPHCore import (
    KernelFunctions,
    OperationDirection,
    OperationProperties,
    ParticleState,
    SupportScheme,
    WarpOperation,
)
from warpSPHCore.util import generateNeighborTestData

wp.init()
DEVICE = "cpu"
NX, NEIGHBORS, DIM, PERIODIC = 8, 20, 2, True  # 64 particles on a periodic 2-D lattice, ~20 neighbours each
OPTIMIZER_STEPS = 3
DENSITY = OperationProperties(
    kernel=KernelFunctions.Wendland2,
    operation=WarpOperation.Density,
    supportMode=SupportScheme.Gather,
    operationMode=OperationDirection.AllToAll,
)


def build():
    """(params, loss()): positions jittered off the lattice and masses (both fitted), and the squared density misfit
    against the unjittered lattice's densities (recomputed each call, neighbourhoods included)."""
    lattice, supports, n, domain, dx = generateNeighborTestData(NX, NEIGHBORS, DIM, PERIODIC, DEVICE)
    kinds = torch.zeros(n, dtype=torch.int32, device=DEVICE)
    ones = torch.ones(n, device=DEVICE)
    with torch.no_grad():
        target = sph.warpOperation(ParticleState(lattice, supports, ones, kinds), DENSITY, domain)
    generator = torch.Generator().manual_seed(0)
    positions = (lattice + 0.2 * dx * torch.randn(lattice.shape, generator=generator)).requires_grad_(True)
    masses = (1.0 + 0.1 * torch.randn(n, generator=generator)).requires_grad_(True)

    def loss():
        rho = sph.warpOperation(ParticleState(positions, supports, masses, kinds), DENSITY, domain)
        return ((rho - target) ** 2).mean()

    return [positions, masses], loss


if __name__ == "__main__":
    params, loss_fn = build()
    optimizer = torch.optim.Adam(params, lr=1e-2)
    for i in range(OPTIMIZER_STEPS):
        optimizer.zero_grad()
        loss = loss_fn()
        loss.backward()
        optimizer.step()
        print(f"iter {i}: loss {loss.item():.6g}")
    positions, masses = (p.detach().double() for p in params)
    print(f"positions: sum {positions.sum().item():.6g}; masses: sum {masses.sum().item():.6g}")
