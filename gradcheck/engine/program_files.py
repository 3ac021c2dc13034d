"""The files a program run by ``gradcheck exec`` is made of, found without importing anything: ``--output`` must
never overwrite one (the script, the ``-m`` module's source, its packages' ``__init__`` and ``__main__``)."""

from __future__ import annotations

import sys
from pathlib import Path

from gradcheck.engine.hosting import program_path0
from gradcheck.model.errors import UsageError


def check_script(target: str) -> None:
    """``gradcheck exec TARGET``'s script, before anything runs: a file, or a folder python can run (one with
    ``__main__.py``); a directory without one is named as a directory."""
    path = Path(target)
    if path.is_file() or (path / "__main__.py").is_file():
        return
    if path.is_dir():
        raise UsageError(
            f"{target!r} is a directory without __main__.py; give a .py file (or a folder with __main__.py), "
            "or -m module"
        )
    raise UsageError(f"no such script {target!r}; give a .py file (or a folder with __main__.py), or -m module")


def program_inputs(target: str, module: bool) -> list[Path]:
    """The source files ``python`` would run for this program, found without importing anything: a report must
    never overwrite one. For ``-m``, each package's ``__init__`` on the way and the module (a package's
    ``__main__``), looked up as python -m would, with ``program_path0`` first on the path."""
    if not module:
        main = Path(target) / "__main__.py"
        return [Path(target), main] if main.is_file() else [Path(target)]
    path0 = program_path0(target, module)
    search = ([path0] if path0 is not None else []) + sys.path[1 if path0 is not None else 0 :]
    found: list[Path] = []
    for part in target.split("."):
        if not search:  # a dotted name below a plain module: python fails, there is no file to protect
            return found
        origin, search = _find(part, search)
        if origin is None and not search:
            return found
        if origin is not None:
            found.append(origin)
    if search:  # a package: python -m runs its __main__
        main, _ = _find("__main__", search)
        if main is not None:
            found.append(main)
    return found


def _find(name: str, folders: list[str]) -> tuple[Path | None, list[str]]:
    """(the file, the folders below) of ``name`` among ``folders``, as the path finder orders them: a regular
    package or a module in the first folder that has one; else every folder named ``name`` (a namespace package,
    such as warp.examples, whose folders a finder would only hand out through its parent in sys.modules)."""
    from importlib.machinery import all_suffixes

    portions = []
    for folder in folders:
        base = Path(folder or ".") / name
        init = base / "__init__.py"
        if init.is_file():
            return init, [str(base)]
        for suffix in all_suffixes():
            candidate = base.with_name(name + suffix)
            if candidate.is_file():
                return candidate, []
        if base.is_dir():
            portions.append(str(base))
    return None, portions
