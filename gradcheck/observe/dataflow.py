"""Which arrays a tape's launches made depend on which params: the forward dataflow of one recording.

Backward runs the dataflow in reverse: a gradient left in an array that depends on a param is propagated into
that param's gradient by the adjoint of the launch that wrote it. So a leftover in such an array contaminates the
param's gradient as surely as a leftover in the param's own gradient does (gradcheck.observe.leftovers).

The walk is gradcheck.tape.flow_graph's over the tape's own launches and recorded copies only (backward replays
nothing else), each launch carrying what it may read into what it may write (gradcheck.tape.launch_access's
``carried_from``). That is the direction that never misses a dependency that exists: a missed one would leave a
leftover that backward really adds into a param unreported as accumulation. An invented one can only come from a
kernel that declares an output its code never touches, or whose code cannot be read; its leftover is a zero-audit
survivor either way. Arrays are keyed by memory, not identity: a leftover in a view of an array (``traj[t]``, a
slice warp.optim is handed) is a leftover in the array.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Influence:
    """Which sources reach which memory on one recording."""

    reach: dict  # node (data pointer, tape.flow_graph's canon) → indices of the sources whose values reach it
    canon: Callable[[int], int]

    def of(self, array) -> frozenset[int]:
        """Indices (into the walk's ``sources``) of the sources whose values reach ``array``'s memory."""
        ptr = getattr(array, "ptr", None)
        return frozenset(self.reach.get(self.canon(ptr), ())) if ptr else frozenset()


def influence(tape, sources: list) -> Influence:
    """Where each of ``sources`` goes through the tape's launches and recorded copies, in recording order."""
    from gradcheck.tape.flow_graph import FlowGraph

    graph = FlowGraph(tape, (), extra=sources)
    return Influence(graph.depends(sources), graph.canon)
