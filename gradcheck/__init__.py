"""gradcheck: gradient diagnostics for NVIDIA Warp and Newton programs.

The public surface is deliberately thin: ``gradcheck.check`` (a scenario), ``gradcheck.audit`` (code in this
process, as ``gradcheck exec`` audits a program), ``gradcheck.testing`` and ``gradcheck.clip``, the result types and
the errors a bad option raises. The pipeline lives in subpackages named for their job (docs/layout.md): ``cli`` →
``engine`` (the drivers: a scenario's passes, or a program under ``exec``) → ``observe`` (the one observer, with
``pytorch`` its torch side), working through ``diagnose``, ``rerun``, ``source``, ``measure``, ``tape`` and
``warp_compat`` → a frozen Trace → ``checks`` (Trace → Findings) → ``model`` (frozen results, options, errors) →
``formats`` (Report → text) → an exit code.
"""

from gradcheck import dataclass_cache  # noqa: F401 - first: it installs itself before our modules build classes
from gradcheck.model.errors import GradcheckError, ScenarioError, UsageError
from gradcheck.model.exit_codes import ExitCode
from gradcheck.model.findings import Finding, Severity
from gradcheck.version import __version__


def check(scenario, **options):
    """Run one scenario and return its frozen Report (see gradcheck.api.check)."""
    from gradcheck.api import check as _check

    return _check(scenario, **options)


def audit(params=None, max_norm=None, keep_going=False, fail_on="error"):
    """Audit every Warp backward inside a ``with`` block, as ``gradcheck exec`` does (see gradcheck.auditing)."""
    from gradcheck.auditing import audit as _audit

    return _audit(params=params, max_norm=max_norm, keep_going=keep_going, fail_on=fail_on)


__all__ = [
    "ExitCode",
    "Finding",
    "GradcheckError",
    "ScenarioError",
    "Severity",
    "UsageError",
    "__version__",
    "audit",
    "check",
]
