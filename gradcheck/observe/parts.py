"""The observer's parts, and the one interface the observer drives them through (its hookspec, as pytest's).

The Observer (observe.observer) is the only object the hooks of gradcheck.warp_compat call; it keeps the
iteration's bookkeeping and owns its parts: the audit window (observe.cadence: which backwards get the full
evidence), captured-graph replays (observe.graphs), exec's per-launch tests (observe.blame_watch) and the causes
(observe.causes: chain breaks, NaN origins, Jacobian rows, the --graph picture). A part never sees the observer:
it gets a ``PartContext`` (the configuration and the few objects the parts share) and explicit callbacks, and the
observer tells every part of the same events, in the same order, through ``ObserverPart``. A part implements the
events it needs; the others are the Protocol's own, which do nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from gradcheck.observe.config import ObserverConfig
    from gradcheck.observe.guard import Guard
    from gradcheck.observe.iteration import Iteration
    from gradcheck.observe.log import IterationLog
    from gradcheck.observe.names import Names
    from gradcheck.observe.params import ParamBook


@dataclass(frozen=True)
class PartContext:
    """What the observer's parts share, never the observer itself."""

    config: ObserverConfig
    guard: Guard  # the observer's own work: hooks stand aside, failures become internal errors
    names: Names  # what the program calls its arrays
    book: ParamBook  # which arrays are params
    log: IterationLog  # the records kept so far (the divergence watch's growth)
    current: Callable[[], Iteration | None]  # the iteration open now, if any


@dataclass(frozen=True, slots=True)
class BackwardEvent:
    """One ``tape.backward`` the program makes: ``number`` counts every backward (1-based); ``measured`` (key →
    array, after it ran) the arrays whose gradients were read."""

    tape: object
    loss: object
    grads: object
    number: int
    measured: Mapping[str, object] = field(default_factory=dict)


@runtime_checkable
class ObserverPart(Protocol):
    """The events the observer tells each of its parts, in this order over a program's life."""

    def idle(self, backwards: int) -> bool:
        """Nothing to do at the recording and backward that follow ``backwards`` backwards: the observer then tells
        it neither (and between audited windows lets recordings go unhooked). The Protocol's own says no (None): a
        part that implements ``on_tape_enter`` or ``on_backward_begin`` is told unless it says otherwise."""

    def on_tape_enter(self, tape, backwards: int) -> None:
        """A recording starts (``with tape:``), ``backwards`` backwards after the program began, whether or not the
        cadence audits its backward."""

    def on_backward_begin(self, backward: BackwardEvent) -> None:
        """A backward is about to run (not one recorded into a captured graph), audited or not."""

    def on_backward_end(self, backward: BackwardEvent, it: Iteration) -> None:
        """An audited backward ran: its gradients are measured into ``it.stats``."""

    def on_window_leave(self) -> None:
        """The cadence leaves an audited window: what a part watched in it ends (the next window starts afresh)."""

    def on_finish(self) -> None:
        """The program ended (or the driver's block): the last of its evidence is settled."""


def implementing(parts, event: str) -> tuple:
    """The parts whose class implements ``event`` itself (not the Protocol's empty default), in order: the observer
    tells the events of every backward only to these, as pytest calls only the plugins that implement a hook (a long
    run makes 10^5 backwards; each empty call is ~0.15 µs)."""
    default = getattr(ObserverPart, event)
    return tuple(part for part in parts if getattr(type(part), event, default) is not default)


class PartAttribute:
    """An attribute of the observer's that is one of its part's (the hooks set ``launch_switch`` on the observer, the
    audit window flips it): read and written through, one line where a property and its setter were eight."""

    def __init__(self, part: str, name: str) -> None:
        self.part, self.name = part, name

    def __get__(self, owner, kind=None):
        return self if owner is None else getattr(getattr(owner, self.part), self.name)

    def __set__(self, owner, value) -> None:
        setattr(getattr(owner, self.part), self.name, value)
