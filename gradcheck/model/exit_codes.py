"""Process exit codes: the contract with CI pipelines (README "Exit codes"; docs/usage.md)."""

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0  # nothing at or above --fail-on
    FINDINGS = 1  # findings at or above --fail-on
    USAGE = 2  # bad option, unknown scenario or fault, unreadable path
    SCENARIO_ERROR = 3  # a scenario failed to load or run
    INTERRUPTED = 130  # Ctrl-C (SIGINT): the scenarios that finished are still reported
    TERMINATED = 143  # SIGTERM: the same


def combine(codes) -> ExitCode:
    """One exit code for several scenarios.

    A stop request wins (the run is incomplete), then a usage error (the command line must be fixed before
    anything else means much), then a scenario that failed to run (its gradients were never checked), then
    findings.
    """
    priority = (ExitCode.INTERRUPTED, ExitCode.TERMINATED, ExitCode.USAGE, ExitCode.SCENARIO_ERROR, ExitCode.FINDINGS)
    codes = set(codes)
    for code in priority:
        if code in codes:
            return code
    return ExitCode.OK
