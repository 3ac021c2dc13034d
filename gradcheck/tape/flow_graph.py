"""The dataflow of one recording, as a graph of launches and arrays: what a gradient chain can follow.

The tape lists its kernel launches and recorded copies (what each may read and may write: gradcheck.tape.
launch_access, in the direction that never misses a dependency); gradcheck.observe.unrecorded adds what moved
values beside it (launches while no tape recorded, copies Warp did not record, host reads), by the same rule. Each
edge is placed in time: a recorded launch at its position on the tape, an event between the two launches it came
between (or before them all, when it happened before the tape was entered). Arrays are keyed by data pointer: a
view a launch is handed and the array the program holds are one node. Two walks follow it: ``walk`` from one node
(gradcheck.diagnose.chain_break reads the path from a param to the loss off it) and ``depends`` from many at once
(gradcheck.observe.dataflow: which arrays a leftover gradient in would reach a param); the ``--graph`` picture
draws it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


class Edge:
    __slots__ = ("time", "kind", "what", "site", "index", "reads", "writes", "why", "kernel", "entry", "labels")

    def __init__(self, time, kind, what, site, index, reads, writes, why=None, kernel=None, entry=None, labels=None):
        self.time, self.kind, self.what, self.site, self.index = time, kind, what, site, index
        self.reads, self.writes, self.why, self.kernel, self.entry = reads, writes, why, kernel, entry
        self.labels = labels or {}

    @property
    def recorded(self) -> bool:
        return self.index is not None

    def place(self) -> str:
        from gradcheck.model.sites import short

        return f"{self.what} ({short(self.site)})" if self.site else self.what


@dataclass
class Walk:
    """Where one node's values went (FlowGraph.walk): ``arrival`` node → when its first value from the start got
    there, ``parent`` node → (edge, node it came from), ``readers`` the edges that read the start and wrote
    elsewhere, ``host`` (edge, node) of each read to the host of a node the start reached."""

    start: int
    arrival: dict
    parent: dict
    readers: list
    host: list


class FlowGraph:
    """The dataflow of one recording: the tape's launches and copies, and what moved values beside it."""

    def __init__(self, tape, events, recording: int | None = None, extra=()) -> None:
        from gradcheck.tape.launch_access import recorded_accesses
        from gradcheck.warp_compat import launch_sites, tape_launches

        self.arrays: dict[int, object] = {}  # data pointer → an array the tape holds there
        self.edges: list[Edge] = []
        launches = tape_launches(tape)
        sites = launch_sites(launches)
        for access in recorded_accesses(launches):
            self.edges.append(self._recorded_edge(access, launches, sites.get(access.index)))
        count = len(launches)
        for order, event in enumerate(events):  # in the order they happened
            at = min(event.at, count) - 0.5 if event.tape == recording and recording is not None else -1.0
            at += (order + 1) * 1e-7  # events between the same two launches keep their order
            self.edges.append(
                Edge(
                    at,
                    event.kind,
                    event.what,
                    event.site,
                    None,
                    event.reads,
                    event.writes,
                    event.why,
                    None,
                    None,
                    dict(event.labels),
                )
            )
        self.edges.sort(key=lambda e: e.time)
        for array in extra:  # arrays the caller holds (params): their views on the tape are them
            if getattr(array, "ptr", None):
                self.arrays.setdefault(array.ptr, array)
        self._spans = _Spans(self.arrays)
        self._one_node_per_array()

    def _recorded_edge(self, access, launches: list, site: str | None) -> Edge:
        """A recorded launch or copy: what it may read → what it may write (gradcheck.tape.launch_access's
        ``carried_from``: the direction that never misses a dependency, as observe.dataflow's walk takes it)."""
        from gradcheck.warp_compat import backward_disabled

        reads, writes = access.carried_from()
        for use in access.arguments:  # every array it is handed is a node, read or written or neither
            for array in use.arrays:
                self.arrays.setdefault(array.ptr, array)
        index = access.index
        if access.kind == "copy":
            return Edge(float(index), "copy", "wp.copy", None, index, _pointers(reads), _pointers(writes))
        kernel, named = access.kernel, {}
        for use in access.arguments:
            for array in use.arrays:
                named.setdefault(array.ptr, f"{kernel.key}.{use.role.name}")
        why = "no-backward" if backward_disabled(kernel) else None
        return Edge(
            float(index),
            "launch",
            kernel.key,
            site,
            index,
            _pointers(reads),
            _pointers(writes),
            why,
            kernel,
            launches[index],
            named,
        )

    def walk(self, start: int) -> Walk:
        """Where the values at node ``start`` go, forward in time: an edge carries a value only if it got there
        before the edge ran. gradcheck.diagnose.chain_break reads the path; ``depends`` is the same walk for many
        sources at once."""
        walk = Walk(start, {start: -math.inf}, {}, [], [])
        arrival, parent = walk.arrival, walk.parent
        for edge in self.edges:
            hit = next((r for r in edge.reads if r in arrival and arrival[r] < edge.time), None)
            if hit is None:
                continue
            if edge.kind == "host-read":
                if hit != start:  # printing the start itself moves nothing
                    walk.host.append((edge, hit))
                continue
            if hit == start and any(w != start for w in edge.writes):  # an update in place moves nothing
                walk.readers.append(edge)
            for w in edge.writes:
                if w not in arrival:
                    arrival[w], parent[w] = edge.time, (edge, hit)
        return walk

    def depends(self, sources: list) -> dict[int, set[int]]:
        """Node → indices (into ``sources``) of the arrays whose values reach it along the edges, in time order:
        ``walk`` from each source at once (observe.dataflow asks it for a recording's params)."""
        reach: dict[int, set[int]] = {}
        for number, source in enumerate(sources):
            if getattr(source, "ptr", None):
                reach.setdefault(self.canon(source.ptr), set()).add(number)
        for edge in self.edges:
            if edge.kind == "host-read":
                continue
            incoming = set().union(*(reach[r] for r in edge.reads if r in reach))
            if incoming:
                for w in edge.writes:
                    reach.setdefault(w, set()).update(incoming)
        return reach

    def canon(self, ptr: int) -> int:
        """The node of a data pointer: the widest array the graph knows whose memory holds it (a view's pointer,
        ``traj[t]`` or ``w[4:8]``, is the array it was taken from), else the pointer itself."""
        return self._spans.canon(ptr)

    def _one_node_per_array(self) -> None:
        canon = self.canon
        for edge in self.edges:
            edge.reads = tuple(dict.fromkeys(canon(p) for p in edge.reads))
            edge.writes = tuple(dict.fromkeys(canon(p) for p in edge.writes))
            edge.labels = {canon(p): text for p, text in reversed(list(edge.labels.items()))}
        self.arrays = {ptr: array for ptr, array in self.arrays.items() if canon(ptr) == ptr}

    def label(self, ptr: int, name_of) -> str:
        array = self.arrays.get(ptr)
        if array is not None:
            return name_of(array)
        for edge in self.edges:
            if ptr in edge.labels:
                return edge.labels[ptr]
        return f"the array at {ptr:#x}"

    def picture(self, name_of, loss, grads, backward: int, arrays=()):
        """This graph in labels only (gradcheck.model.dataflow.Dataflow), for ``--graph``: every launch, copy and host
        read as a node, every array they touch as one, and who reads and writes what. Taken now, while the arrays
        are alive, since the picture is drawn after the program ended. ``loss`` and the arrays ``grads`` seeds are
        the loss nodes; ``arrays``: more the driver holds (its params; their gradients too), named by ``name_of``
        where only launches off the tape touched them (known here by pointer alone), as chain_break names them."""
        from gradcheck.model.dataflow import Dataflow, DataflowLink, DataflowNode

        canon = self.canon
        sinks = {canon(a.ptr): a for a in [loss, *(grads or {})] if a is not None and getattr(a, "ptr", None)}
        held = {canon(a.ptr): a for a in arrays if getattr(a, "ptr", None)}
        gradients = {
            canon(g.ptr): g for g in (getattr(a, "grad", None) for a in held.values()) if getattr(g, "ptr", None)
        }
        named = self._fallback_labels()
        written = {ptr for edge in self.edges for ptr in edge.writes}
        nodes, links, keys, seen = [], [], {}, set()
        for number, edge in enumerate(self.edges):
            if self._from_outside(edge, written, sinks.keys() | held.keys() | gradients.keys()):
                continue
            key = f"t{edge.index}" if edge.recorded else f"e{number}"
            nodes.append(DataflowNode(key, edge.kind, edge.what, edge.time, edge.site, edge.index, edge.why))
            for ptr, kind in [*((p, "read") for p in edge.reads), *((p, "write") for p in edge.writes)]:
                node = keys.setdefault(ptr, f"a{ptr:x}")
                argument = edge.labels[ptr].removeprefix(f"{edge.what}.") if ptr in edge.labels else None
                ends = (node, key) if kind == "read" else (key, node)
                link = DataflowLink(*ends, kind, argument)
                if link not in seen:
                    seen.add(link)
                    links.append(link)
        for ptr in sinks:
            keys.setdefault(ptr, f"a{ptr:x}")
        for ptr, key in keys.items():
            array = next((m[ptr] for m in (self.arrays, sinks, held, gradients) if ptr in m), None)
            if array is not None:  # a gradient buffer has no gradient of its own to miss
                label, has_grad = name_of(array), None if ptr in gradients else getattr(array, "grad", None) is not None
            else:  # known by pointer only (an event off the tape): the label it was launched under
                label, has_grad = named.get(ptr, f"the array at {ptr:#x}"), None
            nodes.append(DataflowNode(key, "array", label, has_grad=has_grad, loss=ptr in sinks))
        loss_key = keys.get(canon(loss.ptr)) if loss is not None and getattr(loss, "ptr", None) else None
        return Dataflow(backward, tuple(nodes), tuple(links), loss_key)

    def _from_outside(self, edge: Edge, written: set, held: set) -> bool:
        """An unrecorded copy of memory nothing here wrote or holds (``wp.array(numpy_values)``, an ``assign`` from
        the host): values entering from outside, which start no gradient chain; drawn, every input array would
        hang from an anonymous pointer."""
        return (
            edge.kind == "copy"
            and not edge.recorded
            and all(p not in self.arrays and p not in written and p not in held for p in edge.reads)
        )

    def _fallback_labels(self) -> dict[int, str]:
        """``label``'s second choice for every pointer at once (``kernel.arg`` of the first edge that named it)."""
        found: dict[int, str] = {}
        for edge in self.edges:
            for ptr, text in edge.labels.items():
                found.setdefault(ptr, text)
        return found


def _pointers(arrays) -> tuple:
    return tuple(array.ptr for array in arrays)


class _Spans:
    """The byte spans of the arrays a graph holds, overlapping ones merged: a view and the array it was taken from
    are one span, whose widest array stands for it. Separate allocations never overlap."""

    def __init__(self, arrays: dict) -> None:
        import bisect

        from gradcheck.warp_compat import byte_extent

        spans = []
        for ptr, array in arrays.items():
            try:
                start, end = byte_extent(array)
            except Exception:  # noqa: BLE001 - an array whose extent cannot be read stays its own node
                continue
            if end > start:
                spans.append((start, end, ptr))
        spans.sort()
        groups: list[list] = []  # [start, end, [(width, ptr), ...]]
        for start, end, ptr in spans:
            if groups and start < groups[-1][1]:
                groups[-1][1] = max(groups[-1][1], end)
                groups[-1][2].append((end - start, ptr))
            else:
                groups.append([start, end, [(end - start, ptr)]])
        self._starts = [g[0] for g in groups]
        self._ends = [g[1] for g in groups]
        self._widest = [max(g[2])[1] for g in groups]
        self._bisect = bisect.bisect_right

    def canon(self, ptr: int) -> int:
        i = self._bisect(self._starts, ptr) - 1
        return self._widest[i] if i >= 0 and ptr < self._ends[i] else ptr
