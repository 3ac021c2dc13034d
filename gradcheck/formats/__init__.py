"""Output formats: one module per format, one registry line per (document, format) a command can print.

A document is what a command reports: a Report (run, blame, exec) or one of gradcheck.model.documents (explain,
selftest, doctor, list, sweep, ci), told apart by its ``KIND``. A renderer satisfies ``Renderer``
(formats/protocol.py): ``render(document, *, color: bool, width: int, verbose: bool) -> str``. JUnit is offered where the result is a
pass/fail suite. A command checks its ``--format`` with :func:`check_supported` before anything runs.
"""

from __future__ import annotations

from enum import Enum

from gradcheck.formats import command_tables, json_format, junit, table
from gradcheck.formats.protocol import Renderer
from gradcheck.model.errors import UsageError


class OutputFormat(str, Enum):
    table = "table"
    json = "json"
    junit = "junit"


RENDERERS: dict[str, dict[OutputFormat, Renderer]] = {
    "report": {
        OutputFormat.table: table.render,
        OutputFormat.json: json_format.render,
        OutputFormat.junit: junit.render,
    },
    "ci": {
        OutputFormat.table: command_tables.ci,
        OutputFormat.json: json_format.render,
        OutputFormat.junit: junit.render,
    },
    "selftest": {
        OutputFormat.table: command_tables.selftest,
        OutputFormat.json: json_format.render,
        OutputFormat.junit: junit.render,
    },
    "explain": {OutputFormat.table: command_tables.explain, OutputFormat.json: json_format.render},
    "doctor": {OutputFormat.table: command_tables.doctor, OutputFormat.json: json_format.render},
    "list": {OutputFormat.table: command_tables.scenario_list, OutputFormat.json: json_format.render},
    "sweep": {OutputFormat.table: command_tables.sweep, OutputFormat.json: json_format.render},
    "new": {OutputFormat.table: command_tables.new, OutputFormat.json: json_format.render},
}
KIND_OF_COMMAND = {"run": "report", "blame": "report", "exec": "report"}


def supported(kind: str) -> tuple[str, ...]:
    return tuple(fmt.value for fmt in RENDERERS[kind])


def check_supported(command: str, fmt) -> None:
    """A format the command cannot print is a usage error naming those it can."""
    kind = KIND_OF_COMMAND.get(command, command)
    if OutputFormat(fmt) not in RENDERERS[kind]:
        raise UsageError(
            f"gradcheck {command} has no --format {OutputFormat(fmt).value}; use {' or '.join(supported(kind))}"
        )


def render(document, fmt, *, color: bool = False, width: int = 100, verbose: bool = False) -> str:
    text = RENDERERS[document.KIND][OutputFormat(fmt)](document, color=color, width=width, verbose=verbose)
    if OutputFormat(fmt) is OutputFormat.table and not color:  # Rich pads every cell: no trailing blanks to diff
        text = "\n".join(line.rstrip() for line in text.split("\n"))
    return text
