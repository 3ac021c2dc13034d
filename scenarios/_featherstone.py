"""Per-step scratch for Newton's SolverFeatherstone (shared by the built-in Newton scenarios).

Stock SolverFeatherstone keeps one set of system matrices (M, J, P, H, L) on the solver for every
step; backward replays each step's kernels over another step's values (write-after-read). Giving
each step its own matrices, swapped in before the step, keeps the forward bit-identical and makes
the gradient match finite differences.
"""

SCRATCH = ("M", "J", "P", "H", "L")


def per_step_scratch(solver, steps: int) -> list[dict]:
    import warp as wp

    return [{name: wp.zeros_like(getattr(solver, name), requires_grad=True) for name in SCRATCH} for _ in range(steps)]


def use_scratch(solver, scratch: dict) -> None:
    for name, array in scratch.items():
        setattr(solver, name, array)
