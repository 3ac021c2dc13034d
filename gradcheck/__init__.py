"""gradcheck: gradient diagnostics for NVIDIA Warp and Newton programs.

The public surface is deliberately thin; the pipeline lives in private-by-convention modules:
resolve (spec → scenario ref) → runner (passes → Trace) → checks (Trace → Findings)
→ report (frozen results) → formats (Report → text) → exit code.
"""

__version__ = "0.1.0"

from gradcheck.model.exit_codes import ExitCode
from gradcheck.model.findings import Finding, Severity


def check(scenario, **options):
    """Run one scenario and return its frozen Report (see gradcheck.api.check)."""
    from gradcheck.api import check as _check

    return _check(scenario, **options)


__all__ = ["ExitCode", "Finding", "Severity", "__version__", "check"]
