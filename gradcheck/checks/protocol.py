"""What a check module is: the interface every module in ``REGISTRY`` satisfies, as pytest's hookspecs say what a
plugin's hook must look like.

A check reads only the Trace (plain data, the same records whoever drove the program) and its thresholds from
CheckOptions, and returns frozen findings; it owns their severities. ``gradcheck explain`` prints its ``SUMMARY`` and
``EXPLAIN``; ``UNDER_EXEC`` (optional) says why a program run once under ``exec`` gives it no evidence.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from gradcheck.model.findings import Finding
    from gradcheck.model.options import CheckOptions
    from gradcheck.model.trace import Trace


@runtime_checkable
class CheckModule(Protocol):
    NAME: str  # the check's id: findings, --select/--ignore, `gradcheck explain NAME`
    SUMMARY: str  # one line: what correct code guarantees
    EXPLAIN: str  # what a finding means, its severities and the fix

    def check(self, trace: Trace, options: CheckOptions) -> tuple[Finding, ...]: ...
