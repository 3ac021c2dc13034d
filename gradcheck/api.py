"""The Python API: ``gradcheck.check(spec_or_scenario, **options) -> Report``.

The same pipeline and the same Report (frozen; ``report.to_dict()`` is the JSON) as
``gradcheck run``, for users who drive gradcheck from their own code or test suite. Options are
validated exactly as on the command line: a bad value raises ``gradcheck.UsageError``.
"""

from __future__ import annotations

from gradcheck.model.options import DEFAULT_RUN
from gradcheck.model.report import Report


def check(
    scenario,
    *,
    device: str | None = None,
    passes: int = DEFAULT_RUN.passes,
    fault: str | None = None,
    settings: dict | None = None,
    fail_on: str = "error",
    fd: str = "fast",
    replay: bool = True,
    clip_norm: float | None = None,
    max_norm: float | None = None,
) -> Report:
    """Run one scenario (a spec string like ``"cartpole"`` or ``"path.py:Name"``, or a scenario
    instance, class or factory) and return its Report. Option values may be any type; they are
    passed to ``setup()`` as strings, exactly as ``--set`` would. ``max_norm`` is ``--max-norm``: None is the
    default (DEFAULT_CHECKS.max_norm), a value given is held whatever the loss did."""
    from gradcheck.engine.environment import check_device, default_device, describe
    from gradcheck.engine.scenario_run import run_one
    from gradcheck.model.options import CheckOptions, FDOptions, RunOptions

    options = RunOptions(
        device=device,
        passes=passes,
        fault=fault,
        settings=settings or {},
        fail_on=fail_on,
        clip_norm=clip_norm,
        checks=CheckOptions(max_norm=max_norm),
        fd=FDOptions(mode=fd),
        replay=replay,
    )
    from gradcheck.engine.interrupts import watch

    used = check_device(device) if device else default_device()
    with watch():  # Ctrl-C stops the caller (a KeyboardInterrupt); a scenario raising one itself is its error
        result = run_one(scenario, options, used)
    return Report(environment=describe(used), scenarios=(result,), fail_on=options.fail_on)
