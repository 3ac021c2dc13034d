"""SPEC → ScenarioRef, without importing anything heavy.

A spec is, in order of precedence: a path to a ``.py`` file (optionally ``file.py:Name``), a
built-in scenario name, a ``gradcheck.scenarios`` entry-point name, or ``pkg.mod:Name``. Every
failure is a UsageError naming the spec and what would have worked.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from gradcheck.model.errors import UsageError


@dataclass(frozen=True)
class ScenarioRef:
    spec: str  # what the user typed
    kind: str  # "built-in" | "file" | "module" | "entry point"
    target: str  # importable module name, or absolute file path for kind "file"
    attr: str  # module attribute holding the scenario
    label: str  # name to report until the scenario itself says otherwise


def resolve(spec: str) -> ScenarioRef:
    spec = spec.strip()
    if not spec:
        raise UsageError("empty scenario spec; give a built-in name (see `gradcheck list`), a .py file or pkg.mod:Name")

    path_part, attr = _split_attr(spec)
    if _looks_like_path(path_part):
        return _file_ref(spec, path_part, attr)

    from gradcheck.scenario import catalog

    builtins = {info.name: info for info in catalog.builtin_infos()}
    key = spec if spec in builtins else spec.replace("_", "-")
    if key in builtins:
        module, _, attr_name = builtins[key].target.partition(":")
        return ScenarioRef(spec, "built-in", module, attr_name, key)

    for ep in catalog.entry_points():
        if ep.name == spec:
            module, _, attr_name = ep.value.partition(":")
            return ScenarioRef(spec, "entry point", module, attr_name or "scenario", ep.name)

    if Path(path_part).expanduser().is_dir() and not (Path(path_part).expanduser() / "__init__.py").is_file():
        raise UsageError(_directory(path_part, spec))  # `some_dir` or `some_dir:Name`: no module, no scenario
    if attr is not None:
        return ScenarioRef(spec, "module", path_part, attr, attr)

    known = ", ".join(sorted(builtins)) or "none"
    raise UsageError(
        f"unknown scenario {spec!r}; built-in scenarios: {known}; or give a path to a .py file, "
        f"file.py:Name, pkg.module:Name, or an installed '{catalog.ENTRY_POINT_GROUP}' entry point"
    )


def _split_attr(spec: str) -> tuple[str, str | None]:
    head, sep, tail = spec.rpartition(":")
    if not sep or not tail or not head or os.sep in tail or "/" in tail:
        return spec, None
    if len(head) == 1 and head.isalpha():  # Windows drive letter, "C:foo"
        return spec, None
    return head, tail


def _looks_like_path(text: str) -> bool:
    return text.endswith(".py") or "/" in text or os.sep in text


def _file_ref(spec: str, path_text: str, attr: str | None) -> ScenarioRef:
    path = Path(path_text).expanduser()
    if path.is_dir():
        raise UsageError(_directory(path_text, spec))
    if not path.is_file():
        raise UsageError(f"scenario file {path_text!r} does not exist; check the path (relative to {os.getcwd()})")
    if not os.access(path, os.R_OK):
        raise UsageError(f"scenario file {path_text!r} is not readable; check its permissions")
    return ScenarioRef(spec, "file", str(path.resolve()), attr or "scenario", attr or path.stem)


def _directory(path_text: str, spec: str) -> str:
    """The usage error of a directory named where a scenario file belongs, with the .py files it holds."""
    try:
        files = sorted(p.name for p in Path(path_text).expanduser().glob("*.py"))
    except OSError:
        files = []
    held = f" (it holds {', '.join(files[:4])}{', …' if len(files) > 4 else ''})" if files else ""
    where = "" if spec == path_text else f" in scenario {spec!r}"
    fix = "give a .py file, as DIR/FILE.py or DIR/FILE.py:Name"
    return f"scenario path {path_text!r}{where} is a directory; {fix}{held}"
