"""gradcheck: gradient diagnostics for NVIDIA Warp and Newton programs.

The public surface is deliberately thin: ``gradcheck.check`` (and ``gradcheck.testing``,
``gradcheck.clip``), the result types and the errors a bad option raises. The pipeline lives in
subpackages named for their role: ``cli`` → ``engine`` (runs scenarios) → ``scenario`` (finds and loads
them), ``probes`` (everything that touches Warp at run time) and ``checks`` (Trace → Findings) →
``model`` (frozen results, options, errors) → ``formats`` (Report → text).
"""

from gradcheck.model.errors import GradcheckError, ScenarioError, UsageError
from gradcheck.model.exit_codes import ExitCode
from gradcheck.model.findings import Finding, Severity
from gradcheck.version import __version__


def check(scenario, **options):
    """Run one scenario and return its frozen Report (see gradcheck.api.check)."""
    from gradcheck.api import check as _check

    return _check(scenario, **options)


__all__ = [
    "ExitCode",
    "Finding",
    "GradcheckError",
    "ScenarioError",
    "Severity",
    "UsageError",
    "__version__",
    "check",
]
