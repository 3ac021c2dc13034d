"""`gradcheck explain CHECK`: what a check means, its common causes, the fix, an example.

The text lives next to each check (``EXPLAIN`` in its module), so adding a check to the registry
adds its explanation too; every finding's fix line points here.
"""

from __future__ import annotations

from gradcheck.errors import UsageError


def checks() -> dict:
    from gradcheck.checks import REGISTRY

    return {module.NAME: module for module in REGISTRY}


def explain(name: str | None) -> str:
    known = checks()
    if not name:
        width = max(len(n) for n in known)
        lines = [f"{n.ljust(width)}  {m.SUMMARY}" for n, m in known.items()]
        return "\n".join(lines) + "\n\ngradcheck explain CHECK for what it means, causes, fix and an example\n"
    module = known.get(name)
    if module is None:
        raise UsageError(f"unknown check {name!r}; checks: {', '.join(known)}")
    return f"{module.NAME}: {module.SUMMARY}\n\n{module.EXPLAIN.strip()}\n"
