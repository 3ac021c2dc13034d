"""The check registry: one module per check, one line each below.

A check module satisfies ``CheckModule`` (checks/protocol.py): ``NAME``, ``SUMMARY``, ``EXPLAIN`` and
``check(trace, options) -> tuple[Finding, ...]``;
it reads only the Trace (plain data, the same records whoever drove the program), never Warp objects, and its
thresholds from CheckOptions. It owns its severities: the same evidence gets the same severity under ``run``,
``exec`` and ``audit()``. A check that raises costs only itself: ``run_checks`` turns the exception into an
``internal-error`` finding naming it, and every other check still runs. (``pointer_issues`` is a helper.)
"""

from __future__ import annotations

from gradcheck.checks import (
    accumulation,
    adjoint_mismatch,
    changed_before_backward,
    cross_rank,
    dangling_adjoint,
    explosion,
    fd_mismatch,
    internal_error,
    missing_gradient,
    mutated_gradient,
    nonfinite,
    reentrancy,
    stale_adjoint,
    stateful_forward,
    torch_bridge,
    vanishing,
    write_after_read,
    zero_audit,
)
from gradcheck.checks.protocol import CheckModule
from gradcheck.model.findings import Finding
from gradcheck.model.options import DEFAULT_CHECKS, CheckOptions
from gradcheck.model.trace import InternalError, Trace

REGISTRY: tuple[CheckModule, ...] = (
    internal_error,
    dangling_adjoint,
    stale_adjoint,
    torch_bridge,
    cross_rank,
    changed_before_backward,
    stateful_forward,
    accumulation,
    zero_audit,
    missing_gradient,
    nonfinite,
    explosion,
    vanishing,
    mutated_gradient,
    fd_mismatch,
    adjoint_mismatch,
    write_after_read,
    reentrancy,
)
BY_NAME = {module.NAME: module for module in REGISTRY}


def not_judged_under_exec(*, blame: bool) -> dict[str, str]:
    """The checks a program run once under ``exec`` gives no evidence to, each with why (its ``UNDER_EXEC``):
    a JUnit consumer must see them skipped, not passed. ``adjoint-mismatch`` is judged unless --no-adjoint-test."""
    skipped = {m.NAME: m.UNDER_EXEC for m in REGISTRY if getattr(m, "UNDER_EXEC", None)}
    if blame:
        skipped.pop(adjoint_mismatch.NAME, None)
    return skipped


def run_checks(trace: Trace, options: CheckOptions = DEFAULT_CHECKS) -> tuple[Finding, ...]:
    """Every registered check on ``trace``, errors first; a check that raises becomes one internal-error finding."""
    findings: list[Finding] = []
    for module in REGISTRY:
        try:
            findings.extend(module.check(trace, options))
        except Exception as exc:  # noqa: BLE001 - one broken check must not take the report with it
            findings.append(internal_error.finding(InternalError.of(f"check {module.NAME}", exc)))
    return tuple(sorted(findings, key=lambda f: -f.severity))
