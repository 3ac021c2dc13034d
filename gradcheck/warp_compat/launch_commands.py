"""Prepared launches: a kernel launch packed once and run many times (``warp.Launch``).

A replay runs the same launch on the same private buffers a few times (the base run, the finite-difference
rollouts, the adjoint twice). ``wp.launch`` packs every argument again on each call (~10-20 us of Python per array
argument); ``wp.launch(..., record_cmd=True)`` packs them once into a ``warp.Launch`` whose ``launch()`` only runs
the kernel. Warp 1.7 is the first release whose ``Launch`` runs an adjoint: before it, ``record_cmd=True`` with
``adjoint=True`` launched at once and returned None, so there no launch is prepared and the caller launches as
before.
"""

from __future__ import annotations

import functools
import inspect


@functools.cache
def launch_commands() -> bool:
    """Whether this Warp prepares forward and adjoint launches alike (``warp.Launch`` takes ``adjoint``: 1.7+)."""
    import warp as wp

    launch_class = getattr(wp, "Launch", None)
    if launch_class is None:
        return False
    try:
        return "adjoint" in inspect.signature(launch_class.__init__).parameters
    except (TypeError, ValueError):
        return False


def prepared_launch(kernel, dim, **arguments):
    """A ``warp.Launch`` of ``wp.launch(kernel, dim, **arguments)`` that has not run yet; ``.launch()`` runs it
    with the arguments as they were packed (the same arrays: their pointers, not their values, are what is kept).
    None where this Warp cannot prepare it (before 1.7) or prepared nothing (a launch of no threads): launch it with
    ``wp.launch`` instead."""
    if not launch_commands():
        return None
    import warp as wp

    command = wp.launch(kernel, dim, record_cmd=True, **arguments)
    return command if hasattr(command, "launch") else None
