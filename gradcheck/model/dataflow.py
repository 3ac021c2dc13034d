"""One backward's recorded dataflow as a picture: launches, arrays and the links between them, in labels only.

``--graph FILE`` draws it (gradcheck.formats.dot_graph) with what the checks found marked on it. It is taken from
gradcheck.tape.flow_graph.FlowGraph while the backward's arrays are alive and kept until the report is written,
long after the program may have freed them: so it holds strings, ints and bools, never an array (a picture that
held one would keep the program's memory alive, and could not cross a process boundary).

The drivers keep a picture only when asked: a command that draws one opens ``collecting()`` around the run, and
``engine.runner`` and ``engine.program_audit`` leave each scenario's picture there under its name (None when no
backward was audited). A context variable rather than a report field, because the picture is an artifact beside
the report (never in its JSON), like ``ci --junit``.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from dataclasses import dataclass

MOVES = ("launch", "copy", "host-read")  # what FlowGraph's edges are: a node each in the picture


@dataclass(frozen=True)
class DataflowNode:
    """A launch (a kernel launch, a ``wp.copy``, a host read) or an array.

    ``key`` is unique in the picture: ``t12`` for tape entry 12, ``e3`` for the third launch gradcheck saw off the
    tape, ``a7f3a…`` for the array at that data pointer (a view and the array it views are one node)."""

    key: str
    kind: str  # "launch" | "copy" | "host-read" | "array"
    label: str  # kernel key, "wp.copy", "numpy()"; for an array, its name in the program ("states[3].joint_q")
    order: float = 0.0  # launches: when it ran (tape position; an event off the tape between two of them)
    site: str | None = None  # launches: "path/file.py:LINE" of the call
    index: int | None = None  # launches: the position on the tape; None when the tape does not hold it
    why: str | None = None  # launches: "no-backward" (enable_backward=False), or how it got off the tape
    has_grad: bool | None = None  # arrays: has a .grad buffer (None: known only by pointer, not held by the tape)
    loss: bool = False  # arrays: the loss (or an output backward was seeded on)

    @property
    def is_launch(self) -> bool:
        return self.kind in MOVES

    @property
    def recorded(self) -> bool:
        return self.index is not None

    @property
    def no_backward(self) -> bool:
        return self.why == "no-backward"


@dataclass(frozen=True)
class DataflowLink:
    """array → launch (the launch reads it) or launch → array (the launch writes it)."""

    source: str
    target: str
    kind: str  # "read" | "write"
    argument: str | None = None  # the kernel argument it was passed as (a struct's arrays: the struct argument)


@dataclass(frozen=True)
class Dataflow:
    """The picture of one backward: which one (1-based, as the report counts them), its nodes in time order, and
    the key of the loss node (None when the loss was not an array the tape saw)."""

    backward: int
    nodes: tuple[DataflowNode, ...]
    links: tuple[DataflowLink, ...]
    loss: str | None = None

    @property
    def launches(self) -> tuple[DataflowNode, ...]:
        return tuple(n for n in self.nodes if n.is_launch)

    @property
    def arrays(self) -> tuple[DataflowNode, ...]:
        return tuple(n for n in self.nodes if not n.is_launch)


_KEPT: ContextVar[list | None] = ContextVar("gradcheck_dataflow_pictures", default=None)


@contextlib.contextmanager
def collecting():
    """While inside, the drivers keep one backward's picture per scenario: yields the list of (scenario name,
    Dataflow or None) they leave, in the order the scenarios ran."""
    kept: list = []
    token = _KEPT.set(kept)
    try:
        yield kept
    finally:
        _KEPT.reset(token)


def wanted() -> bool:
    """A driver asks before it starts: keep a picture (``Observer.keep_dataflow``)?"""
    return _KEPT.get() is not None


def keep(name: str, dataflow: Dataflow | None) -> None:
    """A driver leaves a scenario's picture (None: no backward was audited); nothing when none was asked for."""
    kept = _KEPT.get()
    if kept is not None:
        kept.append((name, dataflow))
