"""JSON, for every command: the document's ``to_dict()``. Keys are public (docs/scenarios.md): add freely, never rename."""

from __future__ import annotations

import json


def render(document, *, color: bool = False, width: int = 100, verbose: bool = False) -> str:
    return json.dumps(document.to_dict(), indent=2, allow_nan=False) + "\n"
