"""What every report page (``--html DIR``) must be, read with the standard library's HTML parser: well formed, no
script, no address outside the page, and the parts the issue names (tests/test_report_page.py, and the browser lane
tests/test_report_page_browser.py, which loads the same pages in Chromium)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

VOID = {"meta", "br", "hr", "img", "input", "link", "wbr", "col", "area", "base", "source", "track", "embed"}
SVG_SELF_CLOSED = {"path", "rect", "line", "circle", "ellipse", "polyline", "polygon"}
PARTS = ("findings", "curves", "dataflow", "suppressed", "notes")  # each scenario's sections, beside #verdict
MAX_BYTES = 2 * 1024 * 1024
_EXTERNAL = re.compile(r"^\s*(?:[a-z][a-z0-9+.-]*:|//)", re.I)


class Page(HTMLParser):
    """The page parsed: its elements' ids and classes, the attributes that can load something, and whether every
    element is closed where it must be."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.text = text
        self.ids: dict[str, str] = {}  # id -> tag
        self.classes: dict[str, int] = {}
        self.tags: dict[str, int] = {}
        self.addresses: list[str] = []  # src, href, xlink:href, action values
        self.problems: list[str] = []
        self._open: list[str] = []
        self.feed(text)
        self.close()
        if self._open:
            self.problems.append(f"never closed: {self._open}")

    def handle_starttag(self, tag, attrs):
        self._element(tag, attrs)
        if tag not in VOID:
            self._open.append(tag)

    def handle_startendtag(self, tag, attrs):
        self._element(tag, attrs)
        if tag not in VOID and tag not in SVG_SELF_CLOSED:
            self.problems.append(f"<{tag}/> self-closed")

    def handle_endtag(self, tag):
        if not self._open or self._open[-1] != tag:
            self.problems.append(f"</{tag}> closes {self._open[-1] if self._open else 'nothing'}")
            if tag in self._open:
                while self._open.pop() != tag:
                    pass
            return
        self._open.pop()

    def _element(self, tag: str, attrs) -> None:
        self.tags[tag] = self.tags.get(tag, 0) + 1
        for name, value in attrs:
            if name == "id":
                if value in self.ids:
                    self.problems.append(f"id {value!r} twice")
                self.ids[value] = tag
            elif name == "class":
                for cls in (value or "").split():
                    self.classes[cls] = self.classes.get(cls, 0) + 1
            elif name in ("src", "href", "xlink:href", "action", "srcset", "poster", "data"):
                self.addresses.append(value or "")

    def external(self) -> list[str]:
        """Whatever would reach outside the page: an address with a scheme (file:, http:, data: …) or ``//``, a
        script, a stylesheet or font loaded by CSS, an import."""
        found = [a for a in self.addresses if _EXTERNAL.match(a) or (a and not a.startswith("#"))]
        found += [f"<{tag}>" for tag in ("script", "link", "img", "iframe", "object", "embed") if tag in self.tags]
        found += re.findall(r"url\((?!\s*['\"]?#)[^)]*\)|@import[^;]*|@font-face", self.text)  # url(#id): in the page
        return found


def checked(directory: Path, scenarios: int = 1) -> Page:
    """The page in ``directory``, asserted well formed, self-contained, small, and whole."""
    path = directory / "index.html"
    data = path.read_bytes()
    assert len(data) <= MAX_BYTES, f"{len(data)} bytes"
    page = Page(data.decode("utf-8"))
    assert page.text.startswith("<!DOCTYPE html>")
    assert not page.problems, page.problems[:5]
    assert not page.external(), page.external()[:5]
    assert page.ids.get("verdict") == "section"
    for k in range(scenarios):
        assert page.ids.get(f"s{k}") == "section"
        for part in PARTS:
            assert page.ids.get(f"s{k}-{part}") == "section", f"s{k}-{part} missing"
    assert (directory / ".gitignore").read_text().splitlines()[-1] == "*"
    return page


def section(page: Page, ident: str) -> str:
    """The text of the section with this id (up to the next one of its level or the end)."""
    start = page.text.index(f'id="{ident}"')
    end = page.text.find("</section>", start)
    return page.text[start:end]
