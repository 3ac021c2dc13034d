"""Per-step scratch for Newton's SolverFeatherstone (shared by the built-in Newton scenarios).

Stock SolverFeatherstone keeps one set of system matrices (M, J, P, H, L) on the solver for every
step; backward replays each step's kernels over another step's values (write-after-read). Giving
each step its own matrices, swapped in before the step, keeps the forward bit-identical and makes
the gradient match finite differences.
"""

SCRATCH = ("M", "J", "P", "H", "L")
SCRATCH_CHOICES = ("shared", "per-step")  # the scenarios' --set scratch=...: one set for every step, or one per step
NEWTON_NEEDS_WARP = "1.17"


def newton_missing() -> str | None:
    """Why Newton cannot run in this environment (its warp-lang floor, or not installed), or None.

    Newton needs warp-lang >= 1.17; engineers pinned to an older Warp (where the historical autodiff bugs
    live) still get every pure-Warp scenario, and the Newton ones are reported as not runnable, not crashed.
    """
    import importlib.util

    import warp as wp

    from gradcheck.model.known_bugs import version_tuple

    if version_tuple(wp.__version__) < version_tuple(NEWTON_NEEDS_WARP):
        return f"this environment has warp-lang {wp.__version__}"
    if importlib.util.find_spec("newton") is None:
        return "newton is not installed"
    return None


def import_newton(scenario: str):
    """``newton``, or one clear line saying why this scenario cannot run here."""
    why = newton_missing()
    if why is not None:
        from gradcheck.model.errors import ScenarioError

        raise ScenarioError(
            f"{scenario}: needs Newton, which needs warp-lang >= {NEWTON_NEEDS_WARP}; {why}. "
            "Use a newer Warp (pip install -U warp-lang newton) or a pure-Warp scenario (rollout, nested-struct, "
            "spring-chain)"
        )
    import newton

    return newton


def per_step_scratch(solver, steps: int) -> list[dict]:
    import warp as wp

    return [{name: wp.zeros_like(getattr(solver, name), requires_grad=True) for name in SCRATCH} for _ in range(steps)]


def use_scratch(solver, scratch: dict) -> None:
    for name, array in scratch.items():
        setattr(solver, name, array)
