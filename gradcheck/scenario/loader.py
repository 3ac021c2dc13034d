"""ScenarioRef → a scenario instance: import the module or file, take the attribute, instantiate it.

Import failures become one line naming the spec (and, for a file, the line that raised); what makes
the object a scenario is ``contract``'s business.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Mapping

from gradcheck.model.errors import ScenarioError, UsageError
from gradcheck.scenario.contract import check_fault, check_options, instantiate
from gradcheck.scenario.resolve import ScenarioRef, resolve


def checked(spec: str, fault: str | None = None, settings: Mapping[str, str] | None = None):
    """The one resolver every command uses: ``spec`` → (the scenario instance, its name), with ``--fault`` and the
    ``--set`` keys checked against that scenario. Raises UsageError when the command line is wrong (unknown
    scenario, fault or option; a directory for a file) and ScenarioError when the scenario cannot be loaded."""
    ref = resolve(spec)
    scenario = load(ref)
    name = scenario_name(scenario, ref)
    check_fault(scenario, name, fault)
    check_options(scenario, name, dict(settings or {}))
    return scenario, name


def label(spec: str) -> str:
    """What to call ``spec`` before (or without) loading it: the scenario's label, or the spec itself."""
    try:
        return resolve(spec).label
    except UsageError:
        return spec


def load(ref: ScenarioRef):
    module = _import(ref)
    if not hasattr(module, ref.attr):
        where = ref.target if ref.kind != "file" else ref.spec.rpartition(":")[0] or ref.spec
        raise ScenarioError(
            f"{where} defines no {ref.attr!r}; add `scenario = MyScenario` to the module "
            f"or name the class explicitly as {where}:MyScenario"
        )
    return instantiate(getattr(module, ref.attr), where=f"{ref.spec}")


def scenario_name(scenario, ref: ScenarioRef) -> str:
    return str(getattr(scenario, "name", None) or ref.label)


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
    module_name = _module_name(path, _read(ref))
    if module_name in sys.modules:  # this file's bytes were loaded before in this process, maybe from another copy
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot load {path!r} as a Python module; give a .py file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # warp.kernel and dataclasses look modules up by name
    # the file's own folder first on the path while it imports, as `python file.py` would have it: a scenario
    # next to the program's model code imports it as the program does (`from model import Problem`)
    folder = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise ScenarioError(f"importing scenario file {ref.spec!r} failed: {_describe(exc, path)}") from exc
    finally:
        if sys.path and sys.path[0] == folder:
            del sys.path[0]
    return module


def _module_name(path: str, source: bytes) -> str:
    """The module name a scenario file is imported under: ``gradcheck_user_<file name>_<digest of its bytes>``.

    Warp names a module's kernel cache entry ``wp_<module name>_<hash of its kernels>``, so a name derived from
    the file's absolute path would make every fresh clone in another folder (a CI checkout) compile all of its
    kernels again; a digest of the contents gives the same file the same cache entry wherever it lies. The
    digest also keeps two different files of the same name apart (in ``sys.modules``, and as Warp modules), and
    an edited file is imported afresh instead of reusing the module of its previous contents. Two copies of one
    file loaded in one process share a single module: the first copy's (its ``__file__``, and the sibling modules
    it imported, which ``sys.modules`` shares process-wide anyway); their source, classes and kernels are the same.
    """
    stem = "".join(c if c.isalnum() else "_" for c in os.path.basename(path).removesuffix(".py"))
    return f"gradcheck_user_{stem}_{hashlib.sha256(source).hexdigest()[:12]}"


def _read(ref: ScenarioRef) -> bytes:
    try:
        with open(ref.target, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise UsageError(f"cannot read scenario file {ref.spec!r}: {exc.strerror or exc}; check the path") from exc


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
