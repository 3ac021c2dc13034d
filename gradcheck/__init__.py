"""gradcheck: gradient diagnostics for NVIDIA Warp and Newton programs.

The public surface is deliberately thin; the pipeline lives in private-by-convention modules:
resolve (spec → scenario ref) → runner (passes → Trace) → checks (Trace → Findings)
→ report (frozen results) → formats (Report → text) → exit code.
"""

__version__ = "0.1.0"

from gradcheck.exit_codes import ExitCode
from gradcheck.findings import Finding, Severity

__all__ = ["ExitCode", "Finding", "Severity", "__version__"]
