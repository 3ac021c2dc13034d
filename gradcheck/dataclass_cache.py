"""gradcheck's own dataclasses, built from compiled code kept across processes.

Why: ``@dataclass`` writes the source of each method it adds (``__init__``, ``__repr__``, ``__eq__``, a frozen class's
``__setattr__`` …) and compiles it with ``exec``: ~0.3 ms a class, four fifths of it the compile. ``gradcheck exec``
builds ~85 of its own classes before it can report: ~30 ms of its fixed cost on a one-backward program (issue 42).
The code compiled from each method's source is kept in one file under the user's cache directory (as Python keeps
``.pyc`` files) and reused: the same source compiles to the same code, so a class built from it is the class
``@dataclass`` builds (tests/test_dataclass_cache.py compares them). Only classes of gradcheck's own modules: the
``exec`` of every other module's dataclass (the program's) is handed on untouched. A file that cannot be read or
written costs only the speed-up, never an error.
"""

from __future__ import annotations

import atexit
import builtins
import dataclasses
import marshal
import os
import sys

OWN = "gradcheck"  # modules whose dataclasses use the cache: this package's
KEEP = 4096  # entries a cache file keeps: those used by this process first (an upgrade's old ones age out)


def cache_path() -> str:
    """``$GRADCHECK_CACHE_DIR``, else ``$XDG_CACHE_HOME/gradcheck``, else ``~/.cache/gradcheck``; one file per
    Python (compiled code is specific to its bytecode version, as ``__pycache__``'s cache tag says)."""
    folder = os.environ.get("GRADCHECK_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "gradcheck"
    )
    return os.path.join(folder, f"dataclasses.{sys.implementation.cache_tag}.marshal")


class CompiledSources:
    """Method source → its compiled code: read from ``path`` on first use, new ones written back at exit."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._codes: dict | None = None  # loaded lazily: a process that builds none of our classes reads nothing
        self._loaded: dict = {}  # source → its code object, made in this process
        self._used: set[str] = set()
        self._new = False

    def code(self, source: str):
        codes = self._codes if self._codes is not None else self._load()
        self._used.add(source)
        found = self._loaded.get(source)
        if found is not None:
            return found
        stored = codes.get(source)
        try:
            found = marshal.loads(stored) if stored is not None else None
        except (EOFError, ValueError, TypeError):
            found = None
        if type(found) is not _CODE:
            # what exec(source) does: the code of the string, compiled without the caller's __future__ flags
            # (dataclasses has none) under the name exec gives a string
            found = compile(source, "<string>", "exec", dont_inherit=True)
            codes[source] = marshal.dumps(found)
            self._new = True
        self._loaded[source] = found
        return found

    def _load(self) -> dict:
        """Source → the marshalled bytes of its code: each code object is made only when a class asks for it (the
        whole file's ~700 made at once cost ~12 ms; bytes ~1 ms)."""
        codes: dict = {}
        try:
            with open(self.path, "rb") as file:
                loaded = marshal.load(file)
            if isinstance(loaded, dict):
                codes = {k: v for k, v in loaded.items() if isinstance(k, str) and isinstance(v, bytes)}
        except (OSError, EOFError, ValueError, TypeError):
            pass  # none yet, another Python's, or truncated: compiled again and rewritten
        self._codes = codes
        return codes

    def save(self) -> None:
        """Write the codes back when this process compiled new ones: the used ones first, older ones up to KEEP.
        Atomic (a temporary file renamed), so processes exiting together (ranks of one job) never mix writes."""
        if not self._new or self._codes is None:
            return
        codes = self._codes
        kept = {s: codes[s] for s in self._used if s in codes}
        for source, code in codes.items():
            if len(kept) >= KEEP:
                break
            kept.setdefault(source, code)
        temporary = f"{self.path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(temporary, "wb") as file:
                marshal.dump(kept, file)
            os.replace(temporary, self.path)
            self._new = False
        except OSError:
            try:
                os.unlink(temporary)
            except OSError:
                pass


_CODE = type(compile("", "<string>", "exec"))
_SOURCES = CompiledSources(cache_path())


def _own(globals_) -> bool:
    name = globals_.get("__name__") if isinstance(globals_, dict) else None
    return isinstance(name, str) and (name == OWN or name.startswith(OWN + "."))


def install() -> None:
    """Route ``dataclasses``' ``exec`` through the cache for gradcheck's modules (once; whatever ``exec`` the module
    used before is what every other call still gets)."""
    if getattr(dataclasses.__dict__.get("exec"), "_gradcheck", False):
        return
    previous = dataclasses.__dict__.get("exec", builtins.exec)

    def exec(source, globals=None, locals=None, /):  # noqa: A001 - the name dataclasses looks up
        if type(source) is str and globals is not None and _own(globals):
            source = _SOURCES.code(source)
        return previous(source, globals, locals)

    exec._gradcheck = True
    dataclasses.exec = exec
    atexit.register(_SOURCES.save)


install()  # on import: gradcheck/__init__.py imports this module before any module of ours builds a class
