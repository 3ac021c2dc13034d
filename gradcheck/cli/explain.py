"""`gradcheck explain CHECK`: what a check means, its common causes, the fix, an example.

The text lives next to each check (``EXPLAIN`` in its module), so adding a check to the registry
adds its explanation too; every finding's fix line points here.
"""

from __future__ import annotations

import typer

from gradcheck.cli.output import fail
from gradcheck.model.errors import UsageError


def explain(
    check: str = typer.Argument(None, metavar="[CHECK]", help="a check name; omit to list them"),
) -> None:
    """What a check means, its common causes, the fix, and an example."""
    try:
        typer.echo(explain_text(check), nl=False)
    except UsageError as exc:
        raise fail(exc) from None


def explain_text(name: str | None) -> str:
    from gradcheck.checks import BY_NAME

    if not name:
        width = max(len(n) for n in BY_NAME)
        lines = [f"{n.ljust(width)}  {m.SUMMARY}" for n, m in BY_NAME.items()]
        return "\n".join(lines) + "\n\ngradcheck explain CHECK for what it means, causes, fix and an example\n"
    module = BY_NAME.get(name)
    if module is None:
        raise UsageError(f"unknown check {name!r}; checks: {', '.join(BY_NAME)}")
    return f"{module.NAME}: {module.SUMMARY}\n\n{module.EXPLAIN.strip()}\n"
