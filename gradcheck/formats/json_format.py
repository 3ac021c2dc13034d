"""JSON report. Keys are public (README): add freely, never rename."""

from __future__ import annotations

import json


def render(report, *, color: bool = False, width: int = 100) -> str:
    return json.dumps(report.to_dict(), indent=2, allow_nan=False) + "\n"
