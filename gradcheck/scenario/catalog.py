"""Scenario metadata (name, description, faults) read from source, without importing it.

`gradcheck list` must stay instant and must not import Warp or Newton. Built-in scenario
modules, and entry-point modules where possible, declare ``name``, ``description`` and
``faults`` as literal class attributes; this module reads them with ``ast``. An entry point whose
source cannot be read statically is imported as a last resort.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

BUILTIN_PACKAGE = "gradcheck.scenarios"
ENTRY_POINT_GROUP = "gradcheck.scenarios"


@dataclass(frozen=True)
class ScenarioInfo:
    name: str
    description: str
    faults: Mapping[str, str] = field(default_factory=dict)
    source: str = "built-in"  # "built-in" | "entry point (dist)" | "file"
    target: str = ""  # "module:attr" or "path.py:attr"

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "description": self.description,
            "faults": dict(self.faults),
            "source": self.source,
        }


def builtin_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec(BUILTIN_PACKAGE)
    return Path(next(iter(spec.submodule_search_locations)))


def builtin_infos() -> list[ScenarioInfo]:
    infos = []
    for path in sorted(builtin_dir().glob("*.py")):
        if path.name.startswith("_"):
            continue
        module = f"{BUILTIN_PACKAGE}.{path.stem}"
        info = static_info(path.read_text(encoding="utf-8"), "scenario", default_name=path.stem.replace("_", "-"))
        if info is not None:
            infos.append(ScenarioInfo(**info, source="built-in", target=f"{module}:scenario"))
    return infos


def entry_points():
    from importlib.metadata import entry_points as _entry_points

    return list(_entry_points(group=ENTRY_POINT_GROUP))


def entry_point_info(ep) -> ScenarioInfo:
    """Static read of the entry point's module; import it only if that fails."""
    import importlib.util

    dist = getattr(getattr(ep, "dist", None), "name", None) or "?"
    source = f"entry point ({dist})"
    module, _, attr = ep.value.partition(":")
    info = None
    try:
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.origin and spec.origin.endswith(".py"):
            info = static_info(Path(spec.origin).read_text(encoding="utf-8"), attr or "scenario", default_name=ep.name)
    except (ImportError, OSError, ValueError, SyntaxError):
        info = None
    if info is None:
        from gradcheck.scenario.contract import describe

        info = describe(ep.load(), default_name=ep.name)
    info["name"] = ep.name  # the entry point's name is what the user types
    return ScenarioInfo(**info, source=source, target=ep.value)


def all_infos() -> list[ScenarioInfo]:
    infos = builtin_infos()
    for ep in entry_points():
        infos.append(entry_point_info(ep))
    return infos


def static_info(source: str, attr: str, default_name: str) -> dict | None:
    """``{"name", "description", "faults"}`` of the scenario that ``attr`` names, or None."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    target = _resolve_target(tree, attr, classes)
    if target is None:
        return None
    values = _literal_class_attrs(target)
    description = values.get("description") or (ast.get_docstring(target) or ast.get_docstring(tree) or "")
    return {
        "name": str(values.get("name") or default_name),
        "description": str(description).strip().splitlines()[0] if description else "",
        "faults": {str(k): str(v) for k, v in (values.get("faults") or {}).items()},
    }


def _resolve_target(tree, attr: str, classes: dict):
    if attr in classes:
        return classes[attr]
    for node in tree.body:  # a factory function whose last statement returns ClassName(...)
        if isinstance(node, ast.FunctionDef) and node.name == attr and node.body:
            last = node.body[-1]
            if isinstance(last, ast.Return) and isinstance(last.value, ast.Call):
                func = last.value.func
                if isinstance(func, ast.Name) and func.id in classes:
                    return classes[func.id]
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == attr for t in node.targets):
            value = node.value
            if isinstance(value, ast.Call):
                value = value.func
            if isinstance(value, ast.Name) and value.id in classes:
                return classes[value.id]
    return None


def _literal_class_attrs(cls: ast.ClassDef) -> dict:
    out = {}
    for node in cls.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            key = node.targets[0].id
            if key in ("name", "description", "faults"):
                try:
                    out[key] = ast.literal_eval(node.value)
                except ValueError:
                    pass
    return out
