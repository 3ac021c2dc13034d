"""``select`` and ``ignore`` from the project's ``[tool.gradcheck]`` table (the nearest pyproject.toml at or above
the working directory that has one, as ruff and pytest find theirs), for run, blame, exec and ci alike.

The rest of the table is ``gradcheck ci``'s (engine.ci reads and checks it); these two keys are read here so
every command suppresses the same findings.
"""

from __future__ import annotations

from pathlib import Path

from gradcheck.model.errors import UsageError
from gradcheck.model.suppressions import Suppressions, parse_rules

KEYS = ("select", "ignore")


def table(directory: Path) -> tuple[dict | None, str | None]:
    """(the ``[tool.gradcheck]`` table, its pyproject.toml) nearest ``directory``; (None, None) when there is none.
    The search stops at the first pyproject.toml, as engine.ci's does."""
    from gradcheck.engine.ci import read_toml

    for folder in (directory, *directory.parents):
        path = folder / "pyproject.toml"
        if path.is_file():
            data = read_toml(path).get("tool", {}).get("gradcheck")
            return (data, str(path)) if data is not None else (None, None)
    return None, None


def suppressions(directory: Path, checks) -> Suppressions:
    """The table's select/ignore rules. The table's keys are checked as ``gradcheck ci`` checks them, so a typo
    (``ignores``) is a usage error for every command, never a suppression silently not applied."""
    from gradcheck.engine.ci import KEYS as TABLE_KEYS
    from gradcheck.engine.ci import known_keys

    data, source = table(directory)
    if data is None:
        return Suppressions()
    if not isinstance(data, dict):
        raise UsageError(f"{source}: [tool.gradcheck] must be a table, got {data!r}")
    known_keys(data, TABLE_KEYS, f"{source}: [tool.gradcheck]")
    rules = {}
    for key in KEYS:
        values = data.get(key, [])
        if isinstance(values, str) or not isinstance(values, list):
            raise UsageError(
                f'{source}: [tool.gradcheck] {key} must be a list of "CHECK[:SUBJECT-GLOB]" strings, got {values!r}'
            )
        rules[key] = parse_rules(values, f"{source} [tool.gradcheck] {key}", checks)
    return Suppressions(rules["select"], rules["ignore"])
