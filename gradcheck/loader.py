"""ScenarioRef → a scenario instance that honours the contract.

The contract (public, see README): ``setup(device, fault=None, **options)``, ``params()``,
``forward()``; optional ``backward(tape, loss)``, ``after_backward()``, ``zero(tape)``;
attributes ``name``, ``description``, ``faults``. A module exposes the scenario as an instance,
a class or a zero-argument factory.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import os
import sys

from gradcheck.errors import ScenarioError, UsageError
from gradcheck.resolve import ScenarioRef

REQUIRED = ("setup", "params", "forward")
OPTIONAL = ("backward", "after_backward", "zero")


def load(ref: ScenarioRef):
    module = _import(ref)
    if not hasattr(module, ref.attr):
        where = ref.target if ref.kind != "file" else ref.spec.rpartition(":")[0] or ref.spec
        raise ScenarioError(
            f"{where} defines no {ref.attr!r}; add `scenario = MyScenario` to the module "
            f"or name the class explicitly as {where}:MyScenario"
        )
    return instantiate(getattr(module, ref.attr), where=f"{ref.spec}")


def instantiate(obj, where: str):
    """An instance from an instance, a class, or a zero-argument factory."""
    if isinstance(obj, type) or (callable(obj) and not _is_scenario(obj)):
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


def scenario_name(scenario, ref: ScenarioRef) -> str:
    return str(getattr(scenario, "name", None) or ref.label)


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


def describe_loaded(obj, default_name: str) -> dict:
    """Metadata from an imported scenario object (catalog fallback)."""
    if not isinstance(obj, type) and callable(obj) and not _is_scenario(obj):
        try:
            obj = obj()  # a factory: constructing a scenario must be cheap (setup() does the work)
        except Exception:
            pass
    desc = getattr(obj, "description", None) or (inspect.getdoc(obj) or "").strip().split("\n")[0]
    faults = getattr(obj, "faults", None) or {}
    return {
        "name": str(getattr(obj, "name", None) or default_name),
        "description": str(desc),
        "faults": {str(k): str(v) for k, v in dict(faults).items()},
    }


def _is_scenario(obj) -> bool:
    return all(callable(getattr(obj, m, None)) for m in REQUIRED)


def _import(ref: ScenarioRef):
    if ref.kind == "file":
        return _import_file(ref)
    try:
        return importlib.import_module(ref.target)
    except ModuleNotFoundError as exc:
        if ref.kind == "module" and exc.name and ref.target.startswith(exc.name):
            raise UsageError(
                f"cannot import {ref.target!r} for scenario {ref.spec!r}: no module named {exc.name!r}; "
                "check the spelling or install the package"
            ) from exc
        raise ScenarioError(f"importing scenario {ref.spec!r} failed: {type(exc).__name__}: {exc}") from exc
    except Exception as exc:
        raise ScenarioError(f"importing scenario {ref.spec!r} failed: {_describe(exc)}") from exc


def _import_file(ref: ScenarioRef):
    path = ref.target
    digest = hashlib.sha1(path.encode()).hexdigest()[:10]
    stem = "".join(c if c.isalnum() else "_" for c in path.rsplit("/", 1)[-1].removesuffix(".py"))
    module_name = f"gradcheck_user_{stem}_{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot load {path!r} as a Python module; give a .py file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # warp.kernel and dataclasses look modules up by name
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise ScenarioError(f"importing scenario file {ref.spec!r} failed: {_describe(exc, path)}") from exc
    return module


def _describe(exc: BaseException, path: str | None = None) -> str:
    if isinstance(exc, SyntaxError):
        return f"SyntaxError: {exc.msg} ({exc.filename}, line {exc.lineno}); fix the file"
    return f"{type(exc).__name__}{_line_in(exc, path)}: {exc}; run with --debug for the traceback"


def _line_in(exc: BaseException, path: str | None) -> str:
    """' at line N' of the scenario file where the exception was raised (the innermost such frame),
    so the user sees which import or statement failed without --debug."""
    if path is None:
        return ""
    import traceback

    target = os.path.realpath(path)
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if os.path.realpath(f.filename) == target]
    return f" at line {lines[-1]}" if lines else ""
