"""A check of gradcheck's that raises, as a real bug in one would: registered beside the real checks, it makes every
audit end with one ``internal-error`` finding (tests/test_exit_code_of_own_failure.py)."""

from __future__ import annotations


class RaisingCheck:
    NAME = "raising"
    SUMMARY = "a check that fails on every trace"
    EXPLAIN = "raises, standing in for a check with a bug"

    @staticmethod
    def check(trace, options=None):
        raise ValueError("the check broke on purpose")


def plant() -> None:
    """Put the raising check first in this process's registry (once, whoever calls it again)."""
    from gradcheck import checks

    if RaisingCheck not in checks.REGISTRY:
        checks.REGISTRY = (RaisingCheck, *checks.REGISTRY)
