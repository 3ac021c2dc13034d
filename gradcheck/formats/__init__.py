"""Output formats: one module per format, one registry line per (document, format) a command can print.

A document is what a command reports: a Report (run, blame, exec) or one of gradcheck.model.documents (explain,
selftest, doctor, list, sweep, ci), told apart by its ``KIND``. A renderer satisfies ``Renderer``
(formats/protocol.py): ``render(document, *, color: bool, width: int, verbose: bool) -> str``. JUnit is offered where the result is a
pass/fail suite. A command checks its ``--format`` with :func:`check_supported` before anything runs.

The registry names each renderer by module and function, imported when it first renders: checking a ``--format``
(``gradcheck exec`` does before its program's first line) loads no format module, Rich or ElementTree.
"""

from __future__ import annotations

from enum import Enum

from gradcheck.formats.protocol import Renderer
from gradcheck.model.errors import UsageError


class OutputFormat(str, Enum):
    table = "table"
    json = "json"
    junit = "junit"
    sarif = "sarif"
    github = "github"
    gitlab = "gitlab"


class _Named:
    """A renderer named by its module and function (a ``Renderer``), imported on its first call."""

    def __init__(self, module: str, function: str) -> None:
        self.module, self.function = module, function

    def __call__(self, document, *, color: bool, width: int, verbose: bool) -> str:
        return getattr(self._module(), self.function)(document, color=color, width=width, verbose=verbose)

    def _module(self):
        if self.module == "plain_table":
            from gradcheck.formats import plain_table as module
        elif self.module == "table":
            from gradcheck.formats import table as module
        elif self.module == "json_format":
            from gradcheck.formats import json_format as module
        elif self.module == "junit":
            from gradcheck.formats import junit as module
        elif self.module == "sarif":
            from gradcheck.formats import sarif as module
        elif self.module == "ci_annotations":
            from gradcheck.formats import ci_annotations as module
        else:
            from gradcheck.formats import command_tables as module
        return module

    def __repr__(self) -> str:
        return f"gradcheck.formats.{self.module}.{self.function}"


RENDERERS: dict[str, dict[OutputFormat, Renderer]] = {
    "report": {
        OutputFormat.table: _Named("plain_table", "render"),  # Rich's table (formats.table) where it must draw it
        OutputFormat.json: _Named("json_format", "render"),
        OutputFormat.junit: _Named("junit", "render"),
        OutputFormat.sarif: _Named("sarif", "render"),
        OutputFormat.github: _Named("ci_annotations", "github"),
        OutputFormat.gitlab: _Named("ci_annotations", "gitlab"),
    },
    "ci": {
        OutputFormat.table: _Named("command_tables", "ci"),
        OutputFormat.json: _Named("json_format", "render"),
        OutputFormat.junit: _Named("junit", "render"),
        OutputFormat.sarif: _Named("sarif", "render"),
        OutputFormat.github: _Named("ci_annotations", "github"),
        OutputFormat.gitlab: _Named("ci_annotations", "gitlab"),
    },
    "selftest": {
        OutputFormat.table: _Named("command_tables", "selftest"),
        OutputFormat.json: _Named("json_format", "render"),
        OutputFormat.junit: _Named("junit", "render"),
    },
    "explain": {
        OutputFormat.table: _Named("command_tables", "explain"),
        OutputFormat.json: _Named("json_format", "render"),
    },
    "doctor": {
        OutputFormat.table: _Named("command_tables", "doctor"),
        OutputFormat.json: _Named("json_format", "render"),
    },
    "list": {
        OutputFormat.table: _Named("command_tables", "scenario_list"),
        OutputFormat.json: _Named("json_format", "render"),
    },
    "sweep": {
        OutputFormat.table: _Named("command_tables", "sweep"),
        OutputFormat.json: _Named("json_format", "render"),
    },
    "new": {OutputFormat.table: _Named("command_tables", "new"), OutputFormat.json: _Named("json_format", "render")},
}
KIND_OF_COMMAND = {"run": "report", "blame": "report", "exec": "report", "combine": "report"}


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
