"""The scenario contract (public, docs/scenarios.md): what makes an object a scenario, and the checks on it.

``setup(device, fault=None, **options)``, ``params()``, ``forward()``; optional ``backward(tape, loss)``,
``after_backward()``, ``zero(tape)``; attributes ``name``, ``description``, ``faults``. A module exposes the
scenario as an instance, a class or a zero-argument factory.

This module knows objects, not where they come from: turning a spec into a module is ``resolve`` and
``loader``; reading metadata without importing is ``catalog``. Both of those use it, and it uses neither.
"""

from __future__ import annotations

import inspect

from gradcheck.model.errors import ScenarioError, UsageError

REQUIRED = ("setup", "params", "forward")


def instantiate(obj, where: str):
    """An instance from an instance, a class, or a zero-argument factory."""
    if isinstance(obj, type) or (callable(obj) and not is_scenario(obj)):
        try:
            obj = obj()
        except Exception as exc:
            raise ScenarioError(f"{where}: creating the scenario raised {type(exc).__name__}: {exc}") from exc
    missing = [m for m in REQUIRED if not callable(getattr(obj, m, None))]
    if missing:
        raise ScenarioError(
            f"{where}: {type(obj).__name__} is not a scenario, it lacks {', '.join(missing)}(); "
            "implement setup(device, fault=None, **options), params() and forward()"
        )
    return obj


def scenario_faults(scenario) -> dict[str, str]:
    faults = getattr(scenario, "faults", None) or {}
    if not isinstance(faults, dict):
        return {str(f): "" for f in faults}
    return {str(k): str(v) for k, v in faults.items()}


def check_fault(scenario, name: str, fault: str | None) -> None:
    if fault is None:
        return
    faults = scenario_faults(scenario)
    if fault not in faults:
        known = ", ".join(faults) or "none"
        raise UsageError(f"unknown fault {fault!r} for scenario {name!r}; its faults: {known} (see `gradcheck list`)")


def check_options(scenario, name: str, options: dict[str, str]) -> None:
    """Unknown --set keys are a usage error, unless setup() takes **options."""
    try:
        sig = inspect.signature(scenario.setup)
    except (TypeError, ValueError):
        return
    params = sig.parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    accepted = [k for k, p in params.items() if k not in ("device", "fault") and p.kind is not p.VAR_POSITIONAL]
    for key in options:
        if key not in accepted:
            known = ", ".join(accepted) or "none"
            raise UsageError(f"unknown option --set {key}=… for scenario {name!r}; its options: {known}")


def describe(obj, default_name: str) -> dict:
    """Metadata from an imported scenario object (catalog fallback)."""
    if not isinstance(obj, type) and callable(obj) and not is_scenario(obj):
        try:
            obj = obj()  # a factory: constructing a scenario must be cheap (setup() does the work)
        except Exception:
            pass
    desc = getattr(obj, "description", None) or (inspect.getdoc(obj) or "").strip().split("\n")[0]
    return {
        "name": str(getattr(obj, "name", None) or default_name),
        "description": str(desc),
        "faults": scenario_faults(obj),
    }


def is_scenario(obj) -> bool:
    return all(callable(getattr(obj, m, None)) for m in REQUIRED)
