"""Process exit codes: the contract with CI pipelines (README "Exit codes"; docs/usage.md).

gradcheck's own failure has a code of its own (4), as pytest's internal error (3) and flake8's crashed plugin do:
a CI job that exits 1 must mean "your gradients have a finding", never "a probe of ours raised". It never hides
anything more urgent: a finding at ``--fail-on`` (1), a scenario or program that failed (3), a usage error (2) or a
stop (130/143) each wins over it (``combine``).
"""

from collections.abc import Iterable
from enum import IntEnum

INTERNAL_ERROR_CHECK = "internal-error"  # checks.internal_error.NAME (the model layer cannot import the checks)


class ExitCode(IntEnum):
    OK = 0  # nothing at or above --fail-on
    FINDINGS = 1  # findings at or above --fail-on
    USAGE = 2  # bad option, unknown scenario or fault, unreadable path
    SCENARIO_ERROR = 3  # a scenario failed to load or run; under exec, the program failed
    INTERNAL_ERROR = 4  # gradcheck's own failure (an internal-error finding) and no other finding at --fail-on
    INTERRUPTED = 130  # Ctrl-C (SIGINT): the scenarios that finished are still reported
    TERMINATED = 143  # SIGTERM: the same


def of_failing(checks: Iterable[str]) -> ExitCode:
    """The exit code of one scenario's failing findings, given by their checks' names: 1 when any is about the
    program, 4 when every one is gradcheck's own failure (``internal-error``), 0 when there are none."""
    checks = set(checks)
    if not checks:
        return ExitCode.OK
    return ExitCode.INTERNAL_ERROR if checks == {INTERNAL_ERROR_CHECK} else ExitCode.FINDINGS


def combine(codes) -> ExitCode:
    """One exit code for several scenarios.

    A stop request wins (the run is incomplete), then a usage error (the command line must be fixed before
    anything else means much), then a scenario that failed to run (its gradients were never checked), then
    findings, then gradcheck's own failure (the rest of the report stands; it must not hide any of the above).
    """
    priority = (
        ExitCode.INTERRUPTED,
        ExitCode.TERMINATED,
        ExitCode.USAGE,
        ExitCode.SCENARIO_ERROR,
        ExitCode.FINDINGS,
        ExitCode.INTERNAL_ERROR,
    )
    codes = set(codes)
    for code in priority:
        if code in codes:
            return code
    return ExitCode.OK
