"""What a finding shows for itself: the one small interface every view reads a finding's evidence through.

A check knows what its evidence means; a view (the table, ``--graph``, the suppressions, the verdict column) must
not. So each check's evidence is a frozen type (it lives beside the check that builds it) that answers four
questions, and the views ask only these (``Evidence``):

- ``subjects``: every subject the finding covers (a family reported once by its worst member: all of its
  members; ``Finding.subjects`` puts the finding's own first);
- ``rank``: the number it is ranked by within its group of the table (larger = worse), with its text; or None;
- ``marks``: what ``--graph`` marks, named by what it is (a chain break, where a NaN started, arrays that changed,
  launches whose adjoint is wrong), never by the check that found it;
- ``to_json()``: its JSON form, the keys documented per check in docs/checks.md (keys are added, never renamed).

``Record`` is the base those types share: a frozen dataclass that also reads as a read-only mapping of its JSON
form (``evidence["x"]`` and ``evidence.get("x")`` keep working for tests, baselines and scripts), pickles (findings
cross a process boundary under ``--timeout``), and is ``extended()`` with keys a driver adds after the check ran
(``--trace-nonfinite``'s first offending operation). Pure Python, layer model.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any, ClassVar, Protocol, runtime_checkable


@dataclass(frozen=True)
class Measure:
    """The number that ranks a subject within its group: ``value`` (the larger, the worse: a measure where
    smaller is worse stores its negation) and ``text``, the number as the row says it."""

    value: float
    text: str

    @classmethod
    def of(cls, value, template: str, smaller_is_worse: bool = False) -> Measure | None:
        """``value`` as a measure, or None when it is not a finite number (nothing to rank by)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return None
        return cls(-value if smaller_is_worse else float(value), template.format(value))


def largest(values, key: str | None = None) -> float | None:
    """The largest finite number of ``values`` (numbers, or mappings read at ``key``); None without one."""
    numbers = [v.get(key) if key and isinstance(v, Mapping) else v for v in values or ()]
    finite = [n for n in numbers if isinstance(n, (int, float)) and not isinstance(n, bool) and math.isfinite(n)]
    return max(finite) if finite else None


# -- marks: what --graph draws, by what they are -------------------------------------------------------------------
@dataclass(frozen=True)
class ChainBreak:
    """Where the chain from ``param`` to the loss breaks: ``array`` and ``launch`` (``kernel (file.py:LINE)``, tape
    position ``index``), ``cause`` (no-backward, host-round-trip…), the ``path`` of arrays from the param."""

    param: str
    cause: str
    array: str | None = None
    launch: str | None = None
    index: int | None = None
    path: tuple[str, ...] = ()


@dataclass(frozen=True)
class Origin:
    """The first backward launch that made a gradient bad (``what``: "NaN/Inf" or "the explosion"): the launch at
    tape position ``index`` of ``kernel`` at ``site``, and the adjoint it made bad (``array``)."""

    what: str
    index: int | None
    kernel: str | None
    site: str | None
    array: str | None


@dataclass(frozen=True)
class ChangedArrays:
    """Arrays changed after the forward read them and before backward, and the launches backward replays with the
    new values (tape positions ``reader_indices``)."""

    arrays: tuple[str, ...]
    reader_indices: tuple[int, ...]


@dataclass(frozen=True)
class BlamedLaunch:
    """A launch whose adjoint disagrees with its own finite differences (or assigns where it must add)."""

    kernel: str | None
    index: int | None
    where: str | None


Mark = ChainBreak | Origin | ChangedArrays | BlamedLaunch


@runtime_checkable
class Evidence(Protocol):
    """What every view may ask a finding's evidence (see the module docstring)."""

    @property
    def subjects(self) -> tuple[str, ...]: ...

    @property
    def rank(self) -> Measure | None: ...

    @property
    def marks(self) -> tuple[Mark, ...]: ...

    def to_json(self) -> dict: ...


# -- the base of the evidence types -------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Record(Mapping):
    """A frozen evidence type: subclass it as ``@dataclass(frozen=True, eq=False)`` with one field per JSON key, in
    the JSON's order. Lists are frozen to tuples and dicts to read-only mappings; ``OPTIONAL`` names the keys left
    out of the JSON while None (a key only some findings of the check have), ``KEYS`` the JSON key of a field whose
    key is no identifier (``break``) or a name of the protocol (``subjects``); ``extra`` holds keys a driver added.
    Equality is the mapping's (a record equals its JSON form as a dict), as the mapping evidence's was."""

    OPTIONAL: ClassVar[frozenset[str]] = frozenset()
    KEYS: ClassVar[Mapping[str, str]] = MappingProxyType({})  # field → its JSON key, where that is no identifier
    extra: Mapping = field(default_factory=dict, kw_only=True)

    def __post_init__(self) -> None:
        for f in fields(self):
            object.__setattr__(self, f.name, _frozen(getattr(self, f.name)))

    # the protocol, for evidence that ranks nothing, covers one subject and marks nothing
    @property
    def subjects(self) -> tuple[str, ...]:
        return ()

    @property
    def rank(self) -> Measure | None:
        return None

    @property
    def marks(self) -> tuple[Mark, ...]:
        return ()

    def to_json(self) -> dict:
        """The JSON form: builtins only (lists, dicts), in field order, then the driver's extra keys. Numbers stay
        as they are (a NaN stays NaN here; the report's JSON writes it as null)."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "extra" or (value is None and f.name in self.OPTIONAL):
                continue
            out[self.KEYS.get(f.name, f.name)] = _plain(value)
        return out | _plain(self.extra)

    def extended(self, **keys) -> Record:
        """A copy with ``keys`` added (a field of the type is replaced, any other key goes to ``extra``)."""
        keys = {next((f for f, k in self.KEYS.items() if k == key), key): v for key, v in keys.items()}
        own = {f.name for f in fields(self)} - {"extra"}
        mine = {k: v for k, v in keys.items() if k in own}
        extra = dict(self.extra) | {k: v for k, v in keys.items() if k not in own}
        return replace(self, **mine, extra=extra)

    # a read-only mapping of the JSON form
    def _json(self) -> dict:
        cached = self.__dict__.get("_json_form")
        if cached is None:
            cached = self.to_json()
            object.__setattr__(self, "_json_form", cached)
        return cached

    def __getitem__(self, key: str) -> Any:
        return self._json()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._json())

    def __len__(self) -> int:
        return len(self._json())

    def __reduce__(self):
        # a read-only mapping cannot be pickled: rebuild from the fields, thawed (the constructor freezes again)
        values = {f.name: _thawed(getattr(self, f.name)) for f in fields(self)}
        return (_rebuild, (type(self), values))


def _rebuild(cls, values: dict) -> Record:
    return cls(**values)


@dataclass(frozen=True, eq=False)
class PlainEvidence(Record):
    """Evidence given as a mapping (a finding built by hand, a baseline read back): its JSON is the mapping; it
    covers only its own subject, ranks nothing and marks nothing (no view guesses from its keys)."""

    data: Mapping = field(default_factory=dict)

    def to_json(self) -> dict:
        return _plain(self.data) | _plain(self.extra)


@dataclass(frozen=True, eq=False)
class InternalErrorEvidence(Record):
    """gradcheck's own failure (model.trace.InternalError): the part that failed, the exception, its traceback."""

    component: str
    error: str
    traceback: str | None


def as_evidence(evidence) -> Evidence:
    """A typed evidence as it is; a mapping (or None) as PlainEvidence."""
    if isinstance(evidence, Record):
        return evidence
    return PlainEvidence(dict(evidence or {}))


def _frozen(value):
    """Lists to tuples and dicts to read-only mappings, all the way down (a finding cannot be edited)."""
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    return value


def _thawed(value):
    """Read-only mappings back to dicts (picklable); everything else as it is."""
    if isinstance(value, MappingProxyType):
        return {k: _thawed(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_thawed(v) for v in value)
    return value


def _plain(value):
    """Builtins for JSON: tuples to lists, mappings (a nested record too) to dicts, NumPy scalars to numbers."""
    if isinstance(value, Record):
        return value.to_json()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        return value.item()
    return value
