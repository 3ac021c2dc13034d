"""Where a finding is in the repository, and what identifies it across runs: what the formats code review reads
(SARIF, GitHub and GitLab annotations) need and a table does not.

A finding names its site as the program's frame said it, often ``train.py:40`` (gradcheck.model.sites.short), or as
a path. ``Locator`` places it in the repository: the source root is ``--source-root``, else the git top level of the
working directory, else the working directory; a short site is looked for beside the scenario or program it came
from, then by name under the root (one file of that name, or the one under the program's folder; several others
and it is left without a location, never guessed). A site outside the root, or none, falls back to the scenario's
or program's own file when that is inside the root; else the finding is listed without a location.

A fingerprint stays the same across runs of the same finding: it hashes the check, the subject, the file and the
source line's text (whitespace collapsed), never the line number or a measured value, so a blank line inserted
above a site leaves it unchanged. Two findings of one report never share one (GitLab would show only the first):
a repeat gets its occurrence number.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

_SITE = re.compile(r"([\w.\-/\\]+\.py):(\d+)")
_SKIPPED = {".git", "node_modules", "__pycache__", ".tox", ".mypy_cache", ".ruff_cache", "build", "dist"}
MAX_FILES = 50000  # files indexed by name under the root (a huge tree is cut short, never slow)


@dataclass(frozen=True)
class Place:
    uri: str | None  # relative to the source root, with forward slashes; None: no location
    line: int | None  # 1-based; None: the file as a whole
    text: str = ""  # the source line, whitespace collapsed ("" without one)


def source_root(given: str | os.PathLike | None = None) -> Path:
    """``given``, else the git top level of the working directory, else the working directory."""
    if given:
        return Path(given).resolve()
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, timeout=10, check=False
        )
        if done.returncode == 0 and done.stdout.strip():
            return Path(done.stdout.strip()).resolve()
    except (OSError, subprocess.SubprocessError):
        pass
    return Path.cwd().resolve()


def site_of(finding) -> tuple[str, int] | None:
    """The finding's own site (its evidence's ``site``, else the first ``file.py:LINE`` its message names)."""
    evidence = finding.evidence.to_json() if hasattr(finding.evidence, "to_json") else dict(finding.evidence)
    for text in (evidence.get("site"), finding.message):
        if isinstance(text, str):
            match = _SITE.search(text)
            if match:
                return match.group(1), int(match.group(2))
    return None


class Locator:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._by_name: dict[str, list[Path]] | None = None
        self._lines: dict[Path, list[str]] = {}

    def place(self, finding, spec: str | None) -> Place:
        """Where ``finding`` (of the scenario or program ``spec``) is in the repository."""
        anchor = _file(spec)
        site = site_of(finding)
        if site is not None:
            path = self._resolve(site[0], anchor)
            if path is not None and self._inside(path):
                return Place(self._uri(path), site[1], self._text(path, site[1]))
        if anchor is not None and self._inside(anchor):
            return Place(self._uri(anchor), None)
        return Place(None, None)

    def _resolve(self, name: str, anchor: Path | None) -> Path | None:
        given = Path(name)
        if given.is_absolute():
            return given if given.is_file() else None
        for base in [p for p in (anchor.parent if anchor else None, Path.cwd(), self.root) if p is not None]:
            if (base / given).is_file():
                return (base / given).resolve()
        found = self._index().get(given.name, [])
        if anchor is not None:
            near = [p for p in found if anchor.parent in p.parents]
            found = near or found
        return found[0] if len(found) == 1 else None

    def _index(self) -> dict[str, list[Path]]:
        if self._by_name is None:
            self._by_name, count = {}, 0
            for folder, dirs, names in os.walk(self.root):
                dirs[:] = [d for d in dirs if d not in _SKIPPED and not d.startswith(".venv")]
                for name in names:
                    if name.endswith(".py"):
                        self._by_name.setdefault(name, []).append(Path(folder, name).resolve())
                        count += 1
                if count > MAX_FILES:
                    break
        return self._by_name

    def _inside(self, path: Path) -> bool:
        return path == self.root or self.root in path.parents

    def _uri(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def around(self, place: Place, context: int = 3) -> list[tuple[int, str]]:
        """The source lines from ``context`` before ``place``'s line to ``context`` after it, as (number, text)."""
        if place.uri is None or place.line is None:
            return []
        lines = self._file_lines(self.root / place.uri)
        first, last = max(1, place.line - context), min(len(lines), place.line + context)
        return [(n, lines[n - 1].rstrip()) for n in range(first, last + 1)]

    def _text(self, path: Path, line: int) -> str:
        lines = self._file_lines(path)
        return " ".join(lines[line - 1].split()) if 0 < line <= len(lines) else ""

    def _file_lines(self, path: Path) -> list[str]:
        """The file's lines, read once, split at Python's own line breaks (not str.splitlines()'s: a form feed is
        no line break to the tokenizer); none when it cannot be read."""
        if path not in self._lines:
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
                self._lines[path] = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
            except OSError:
                self._lines[path] = []
        return self._lines[path]


def _file(spec: str | None) -> Path | None:
    """A scenario's or program's spec as a file, when it is one (``train.py``, ``pkg/mod.py:attr``)."""
    if not spec:
        return None
    path = Path(spec.split(":", 1)[0] if spec.count(":") == 1 and not re.match(r"^[A-Za-z]:", spec) else spec)
    return path.resolve() if path.suffix == ".py" and path.is_file() else None


class Fingerprints:
    """A stable fingerprint per finding, unique within one report."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}

    def of(self, finding, place: Place) -> str:
        key = "\0".join((finding.check, finding.subject, place.uri or "", place.text))
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]
        count = self._seen.get(digest, 0) + 1
        self._seen[digest] = count
        return digest if count == 1 else f"{digest}:{count}"
