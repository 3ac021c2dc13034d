"""Source patterns in a kernel that a known Warp release differentiates wrongly.

adjoint-mismatch names the launch whose adjoint is wrong; when the kernel also contains a construct that an
upstream bug mishandles on the Warp in use, the finding can say which line and which release fixed it
(gradcheck.model.known_bugs). Found from the kernel's own source and options, not from running it.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass


@dataclass(frozen=True)
class Suspect:
    bug: str  # the name of a KnownBug in gradcheck.model.known_bugs
    where: str | None  # file:line of the construct
    what: str


def suspects(kernel) -> tuple[Suspect, ...]:
    """Constructs in ``kernel`` that a known Warp bug mishandles, whichever Warp is in use."""
    found = []
    options = getattr(kernel, "options", None) or {}
    module_options = getattr(getattr(kernel, "module", None), "options", None) or {}
    if options.get("enable_backward") is True and module_options.get("enable_backward") is False:
        found.append(
            Suspect(
                "FUNC_ADJOINTS_FOLLOW_MODULE",
                _where(kernel, None),
                "the kernel opts in to enable_backward=True in a module built with it off",
            )
        )
    found.extend(_same_element_ternaries(kernel))
    return tuple(found)


def _same_element_ternaries(kernel) -> list[Suspect]:
    """``a[i] if c else f(a[i])``: both branches read the same subscript."""
    func = getattr(kernel, "func", None)
    try:
        lines, first = inspect.getsourcelines(func)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return []
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.IfExp):
            continue
        left = {ast.dump(n) for n in ast.walk(node.body) if isinstance(n, ast.Subscript)}
        common = [n for n in ast.walk(node.orelse) if isinstance(n, ast.Subscript) and ast.dump(n) in left]
        if common:
            text = ast.unparse(common[0])
            found.append(
                Suspect(
                    "TERNARY_SAME_ELEMENT",
                    _where(kernel, first + node.lineno - 1),
                    f"both branches of a conditional expression read {text}",
                )
            )
    return found


def _where(kernel, line: int | None) -> str | None:
    func = getattr(kernel, "func", None)
    try:
        path = inspect.getsourcefile(func)
        if line is None:
            line = inspect.getsourcelines(func)[1]
    except (OSError, TypeError):
        return None
    return f"{path}:{line}"
