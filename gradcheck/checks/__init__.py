"""The check registry: one module per check, one line each below.

A check module defines ``NAME``, ``SUMMARY`` and ``check(trace, options) -> tuple[Finding, ...]``;
it reads only the Trace (plain data), never Warp objects, and its thresholds from CheckOptions.
(``pointer_issues`` is a helper, not a check.)
"""

from __future__ import annotations

from gradcheck.checks import (
    accumulation,
    adjoint_mismatch,
    changed_before_backward,
    dangling_adjoint,
    explosion,
    fd_mismatch,
    missing_gradient,
    mutated_gradient,
    nonfinite,
    reentrancy,
    stale_adjoint,
    stateful_forward,
    vanishing,
    write_after_read,
    zero_audit,
)
from gradcheck.model.findings import Finding
from gradcheck.model.options import DEFAULT_CHECKS, CheckOptions
from gradcheck.model.trace import Trace

REGISTRY = (
    dangling_adjoint,
    stale_adjoint,
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


def run_checks(trace: Trace, options: CheckOptions = DEFAULT_CHECKS) -> tuple[Finding, ...]:
    findings: list[Finding] = []
    for module in REGISTRY:
        findings.extend(module.check(trace, options))
    return tuple(sorted(findings, key=lambda f: -f.severity))
