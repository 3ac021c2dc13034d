"""The check registry: one module per check, one line each below.

A check module defines ``NAME``, ``SUMMARY`` and ``check(trace) -> tuple[Finding, ...]``; it reads
only the Trace (plain data), never Warp objects. (``pointer_issues`` is a helper, not a check.)
"""

from __future__ import annotations

from gradcheck.checks import accumulation, dangling_adjoint, missing_gradient, stale_adjoint, zero_audit
from gradcheck.findings import Finding
from gradcheck.trace import Trace

REGISTRY = (
    dangling_adjoint,
    stale_adjoint,
    accumulation,
    zero_audit,
    missing_gradient,
)


def run_checks(trace: Trace) -> tuple[Finding, ...]:
    findings: list[Finding] = []
    for module in REGISTRY:
        findings.extend(module.check(trace))
    return tuple(sorted(findings, key=lambda f: -f.severity))
