"""Captured graphs (``wp.ScopedCapture`` / ``wp.capture_launch``): what each replay of a graph runs again.

While a graph is captured nothing runs: launches, copies and a backward are recorded into it. So the observer
notes, per graph, the backward captured in it (each replay of that graph is a backward of its tape) and the
tapes recorded in it (its forward, replayed from copies once for write-after-read). A graph with no backward
captured in it (a forward-only capture, or the forward half of a program that captures the two apart) is no
backward, however often it runs. Graphs are held here (not only their ids): a freed graph's id can be handed to
the next graph Python makes, and a forward-only graph must never inherit a freed backward graph's entry.
"""

from __future__ import annotations

from collections.abc import Callable

from gradcheck.observe import values
from gradcheck.observe.parts import ObserverPart, PartContext

MAX_FORWARDS = 16


class CapturedGraphs:
    def __init__(self) -> None:
        self._backward = None  # (tape, loss, grads) of a backward being recorded into the capture under way
        self._tapes: dict[int, object] = {}  # id(tape) → tape recorded in the capture under way
        self._backwards: dict[int, tuple] = {}  # id(graph) → (graph, tape, loss, grads): what its replays run
        self._forwards: dict[int, list] = {}  # id(graph) → [graph, its tapes, replays so far, the one due]

    def recorded_backward(self, tape, loss, grads) -> None:
        self._backward = (tape, loss, grads)

    def recorded_tape(self, tape) -> None:
        self._tapes[id(tape)] = tape

    def ended(self, graph) -> None:
        """A capture ended with ``graph``: what was recorded since it began belongs to it (and only to it)."""
        backward, self._backward = self._backward, None
        tapes, self._tapes = list(self._tapes.values()), {}
        if graph is None:
            return
        self._backwards.pop(id(graph), None)
        self._forwards.pop(id(graph), None)
        if backward is not None:
            self._backwards[id(graph)] = (graph, *backward)
        if tapes:
            # replayed before the graph's first run on CPU; on CUDA before its second (Observer._captured_forward_due)
            due = 2 if getattr(getattr(graph, "device", None), "is_cuda", True) else 1
            self._forwards[id(graph)] = [graph, tapes, 0, due]
            while len(self._forwards) > MAX_FORWARDS:
                self._forwards.pop(next(iter(self._forwards)))

    def backward_of(self, graph) -> tuple | None:
        """(tape, loss, grads) of the backward captured in ``graph``, or None: a replay of it is no backward."""
        found = self._backwards.get(id(graph))
        return found[1:] if found is not None and found[0] is graph else None

    def forward_due(self, graph) -> list | None:
        """The tapes of ``graph``'s forward when this replay is the one before which they are replayed, else None."""
        forward = self._forwards.get(id(graph))
        if forward is None or forward[0] is not graph:
            return None
        forward[2] += 1
        return forward[1] if forward[2] == forward[3] else None

    def ran_once(self) -> bool:
        """A captured forward whose graph ran fewer times than its replay needed (CUDA: once)."""
        return any(0 < replays < due for _graph, _tapes, replays, due in self._forwards.values())


class GraphReplays(ObserverPart):
    """The observer's part for captured graphs: a capture's end, a replay (a backward when one was captured, handed
    to ``backward(tape, loss, grads, run)``: the observer's own), and the captured forward's one replay from copies
    for write-after-read (its hazards handed to ``hazards``; ``tests``: exec's per-launch tests, which copy what
    each launch of it reads, or None)."""

    def __init__(self, context: PartContext, notes: list, tests, backward: Callable, hazards: Callable) -> None:
        self.guard, self.names, self.notes, self.tests = context.guard, context.names, notes, tests
        self._backward, self._hazards = backward, hazards
        self.captured = CapturedGraphs()
        self.replays = self.audited = 0  # graph replays seen, and audited as a backward

    def recorded_backward(self, tape, loss, grads) -> None:
        """A backward recorded into the capture under way: each replay of its graph runs it again."""
        self.captured.recorded_backward(tape, loss, grads)

    def recorded_tape(self, tape) -> None:
        """A recording made into the capture under way: its graph's forward."""
        self.captured.recorded_tape(tape)

    def ran_once(self) -> bool:
        return self.captured.ran_once()

    def on_capture_end(self, graph) -> None:
        """A capture ended: if a backward was recorded into it, each replay of ``graph`` is a backward; the tapes
        recorded in it are its forward, checked for write-after-read by replaying them from copies."""
        self.captured.ended(graph)

    def on_graph_replay(self, graph, run):
        """A replayed graph (Newton's examples capture forward+backward once) runs the captured backward again
        without Python seeing it: audited as a backward of its tape. A graph with no backward in it is not one."""
        self.replays += 1
        tapes = self.captured.forward_due(graph)
        found = self.captured.backward_of(graph)
        if tapes:
            self._captured_forward_due(tapes, found)
        if found is None:
            return run()
        self.audited += 1
        return self._backward(*found, run)

    def _captured_forward_due(self, tapes: list, backward=None) -> None:
        """Replay a graph's forward from copies once, just before a replay of the graph, from the state that replay
        starts from (a stale value read before the forward rewrites it is only stale then). On CUDA before the
        second replay, not the first: arrays the capture allocated live in the graph's own memory, which CUDA maps
        once the graph has run (copied before, they are an invalid argument)."""
        with self.guard("write-after-read (captured forward)"):
            found = [self._replay_captured(tape, backward) for tape in tapes]
            found = [f for f in found if f is not None]
            if found:  # every tape the capture recorded: their hazards and harmless rewrites together
                self._hazards(tuple(tuple(r for f in found for r in f[i]) for i in (0, 1)))

    def _replay_captured(self, tape, backward=None) -> tuple | None:
        """The captured forward run again from copies; the per-launch adjoint tests copy what each launch reads
        (``backward``: the graph's (tape, loss, grads), whose loss they test towards)."""
        from gradcheck.observe.rewrites import replay_captured

        tests = self.tests.captured(tape) if self.tests is not None else None
        watch = replay_captured(tape, values.fingerprint, tests)
        if tests is not None:
            self.tests.captured_done(tape, backward, watch if isinstance(watch, str) else None)
        if isinstance(watch, str):
            note = f"write-after-read not checked on the captured forward: {watch}"
            if note not in self.notes:
                self.notes.append(note)
            return None
        self.names.tape = tape
        return watch.results(self.names.label)
