"""`gradcheck explain CHECK`: what a check means, its common causes, the fix, an example.

The text lives next to each check (``EXPLAIN`` in its module), so adding a check to the registry
adds its explanation too; every finding's fix line points here.
"""

from __future__ import annotations

from pathlib import Path

import typer

from gradcheck.cli.reporting import OUTPUT, deliver, format_option, usage_exit
from gradcheck.formats import OutputFormat, check_supported
from gradcheck.model.errors import UsageError


def explain(
    check: str = typer.Argument(None, metavar="[CHECK]", help="a check name; omit to list them"),
    fmt: OutputFormat = format_option("explain"),
    output: Path = OUTPUT,
) -> None:
    """What a check means, its common causes, the fix, and an example."""
    from gradcheck.cli.output import check_writable

    try:
        check_supported("explain", fmt)
        check_writable(output)
        document = explain_document(check)
    except UsageError as exc:
        raise usage_exit("explain", exc, fmt, output) from None
    deliver(document, fmt, output)


def explain_document(name: str | None):
    """Every check's summary (no name), or the one check's full text; an unknown name is a usage error."""
    from gradcheck.checks import BY_NAME
    from gradcheck.model.documents import CheckText, ExplainDoc

    if not name:
        return ExplainDoc(tuple(CheckText(n, m.SUMMARY) for n, m in BY_NAME.items()))
    module = BY_NAME.get(name)
    if module is None:
        import difflib

        close = difflib.get_close_matches(name, BY_NAME, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise UsageError(f"unknown check {name!r}; {hint}checks: {', '.join(BY_NAME)}")
    return ExplainDoc((CheckText(module.NAME, module.SUMMARY, module.EXPLAIN.strip()),))
