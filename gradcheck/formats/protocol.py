"""What a renderer is: the one interface every format satisfies, as pip-audit's format interface does.

A renderer turns one document (a Report, or one of gradcheck.model.documents, told apart by its ``KIND``) into the
text a command prints; it reads findings' evidence only through the evidence protocol (gradcheck.model.findings),
never by a check's name. Adding a format is one module with such a function and one line per document in
``RENDERERS``.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Renderer(Protocol):
    def __call__(self, document, *, color: bool, width: int, verbose: bool) -> str: ...
