"""fd-mismatch: the tape's gradient disagrees with central finite differences of the loss.

Reads the finite-difference probe the runner ran after the passes (gradcheck.probes.finite_diff): the
worst relative error of the directional derivatives (fast mode) and, when fast mode failed or
``--fd elements`` asked for it, the worst single element, named by path with its AD and FD values.
Bands: warning from 1e-2 (warp.autograd's rtol), error from 1e-1; both configurable.
"""

from __future__ import annotations

from gradcheck.model.findings import Finding, Severity
from gradcheck.model.trace import Trace

NAME = "fd-mismatch"
SUMMARY = "the tape's gradient must agree with central finite differences of the loss"

EXPLAIN = """
What it means: the tape's gradient disagrees with central finite differences of the loss, along random
directions (fast mode) or for single elements (the worst one is named).

Common causes: a wrong @wp.func_grad custom adjoint; buffers rewritten between forward and backward (see
write-after-read and reentrancy: shared solver scratch); non-differentiable operations (clamps, branches, integer
casts) on the path; a kernel with enable_backward=False.

Fix: check the custom adjoint of the element named, or give each step its own buffers.

    @wp.func_grad(energy)
    def adj_energy(v: wp.vec3, adj_ret: float):
        wp.adjoint[v] += wp.vec3(2.0 * v[0], 2.0 * v[1] * v[2], v[1] * v[1] + 1.0) * adj_ret
"""


def check(trace: Trace, options=None) -> tuple[Finding, ...]:
    fd = trace.fd
    if fd is None or fd.skipped:
        return ()
    bands = fd  # FDResult carries the warning and error bands it was run with
    worst_dir = max(fd.directions, key=lambda p: p.rel_error, default=None)
    worst_el = max(fd.elements, key=lambda p: p.rel_error, default=None)
    score = max(worst_dir.rel_error if worst_dir else 0.0, worst_el.rel_error if worst_el else 0.0)
    if score < bands.warn:
        return ()
    severity = Severity.ERROR if score >= bands.error else Severity.WARNING
    parts = []
    if worst_dir is not None:
        parts.append(
            f"directional derivative off by up to {worst_dir.rel_error:.3g} (relative) over {len(fd.directions)} "
            f"random directions: tape {worst_dir.ad:.6g} vs finite difference {worst_dir.fd:.6g} (eps {worst_dir.eps:g})"
        )
    if worst_el is not None:
        parts.append(
            f"worst element {worst_el.label}: AD {worst_el.ad:.6g} vs FD {worst_el.fd:.6g} "
            f"(abs {worst_el.abs_error:.3g}, rel {worst_el.rel_error:.3g})"
        )
    return (
        Finding(
            check=NAME,
            severity=severity,
            subject=worst_el.label if worst_el is not None else "directional derivative",
            message="; ".join(parts),
            hint=(
                "a wrong custom adjoint (@wp.func_grad), buffers rewritten between forward and backward "
                "(see write-after-read / reentrancy), or a non-differentiable operation; inspect the element named"
            ),
            evidence={
                "mode": fd.mode,
                "max_direction_error": worst_dir.rel_error if worst_dir else None,
                "directions": [_probe(p) for p in fd.directions],
                "elements": [_probe(p) for p in sorted(fd.elements, key=lambda p: -p.rel_error)],
                "rollouts": fd.rollouts,
                "loss": fd.loss,
                "warn": bands.warn,
                "error": bands.error,
            },
        ),
    )


def _probe(p) -> dict:
    return {"label": p.label, "ad": p.ad, "fd": p.fd, "eps": p.eps, "rel_error": p.rel_error, "abs_error": p.abs_error}
