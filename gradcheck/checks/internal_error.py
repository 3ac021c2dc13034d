"""internal-error: a probe or check of gradcheck's own failed on this program; every other finding still stands.

A linter whose plugin crashes on one file still reports the others (flake8 names the plugin); gradcheck does the
same for its checks and probes: the failure becomes one finding naming the component and the exception, the rest
of the report is computed and written as usual, never a lost report. Its exit code is its own, 4 (gradcheck failed,
not the program), unless something more urgent stands beside it: 1 beside a finding about the program, 3 beside a
program or scenario that failed (docs/usage.md, exit codes).
"""

from __future__ import annotations

from gradcheck.model.evidence import InternalErrorEvidence
from gradcheck.model.findings import Finding, Severity
from gradcheck.model.trace import InternalError, Trace

NAME = "internal-error"
SUMMARY = "gradcheck's own probes and checks must not fail on the program"

EXPLAIN = """
What it means: one of gradcheck's own checks or probes raised an exception on this program. That part of the
audit is missing; every other check ran and is reported as usual. The finding names the component and the
exception; the traceback is in the JSON evidence, and on stderr with --debug.

Common causes: a Warp release that changed something gradcheck reads (struct layouts, tape entries), or a
program shape nobody here has met yet.

Fix: none on your side. Report it with `gradcheck doctor` and the traceback (--debug); the rest of the report is
trustworthy.
"""


def check(trace: Trace, options=None) -> tuple[Finding, ...]:
    return tuple(finding(e) for e in trace.internal_errors)


def finding(error: InternalError) -> Finding:
    return Finding(
        check=NAME,
        severity=Severity.ERROR,
        subject=error.component,
        message=f"{error.component} failed: {error.error}; the rest of the report is unaffected",
        hint="not a finding about your program: report it with `gradcheck doctor` and the traceback (--debug)",
        evidence=InternalErrorEvidence(error.component, error.error, error.traceback),
    )
