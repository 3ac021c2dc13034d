"""Report formats: one module each, one enum value each, one mapping line each.

A format module defines ``render(report, *, color: bool, width: int) -> str``.
"""

from __future__ import annotations

from enum import Enum

from gradcheck.formats import json_format, table


class OutputFormat(str, Enum):
    table = "table"
    json = "json"


RENDERERS = {
    OutputFormat.table: table.render,
    OutputFormat.json: json_format.render,
}


def render(report, fmt: OutputFormat, *, color: bool = False, width: int = 100) -> str:
    return RENDERERS[OutputFormat(fmt)](report, color=color, width=width)
