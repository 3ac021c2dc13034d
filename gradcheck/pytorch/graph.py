"""One backward's autograd graph, walked from its roots before it runs: the leaves it reaches (what gets a
``.grad``), the custom ``torch.autograd.Function`` nodes in it (where Warp's adjoints come back into torch), and
which node hands each of them its ``grad_output``. Bounded: a graph past ``limit`` nodes is walked that far."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Graph:
    leaves: list = field(default_factory=list)  # leaf tensors with requires_grad, through AccumulateGrad
    reached: set = field(default_factory=set)  # id() of those leaves
    custom: list = field(default_factory=list)  # BackwardCFunction nodes (a Python Function's backward)
    producers: dict = field(default_factory=dict)  # id(custom node) -> [(node giving it grad_output, edge index)]
    complete: bool = True
    nodes_seen: list = field(default_factory=list)  # every node walked (what saved tensors for this backward)


def tensors_in(value) -> list:
    """The tensors of an argument torch takes as one tensor or a sequence of them (``outputs``, ``grad_outputs``,
    what ``backward`` is called on, what a Function returns); none for None or anything else."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    return [v for v in value if isinstance(v, torch.Tensor)] if isinstance(value, (tuple, list)) else []


def walk(roots, limit: int) -> Graph:
    from torch.autograd.function import BackwardCFunction

    graph = Graph()
    custom_ids: set[int] = set()
    stack = [r.grad_fn for r in roots if getattr(r, "grad_fn", None) is not None]
    seen: set[int] = set()
    leaf_ids: set[int] = set()
    for r in roots:  # a root that is itself a leaf (x.backward() on a leaf): it gets its own gradient
        if r.requires_grad and r.grad_fn is None and id(r) not in leaf_ids:
            leaf_ids.add(id(r))
            graph.leaves.append(r)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        graph.nodes_seen.append(node)
        if len(graph.nodes_seen) > limit:
            graph.complete = False
            break
        variable = getattr(node, "variable", None)
        if variable is not None and id(variable) not in leaf_ids:
            leaf_ids.add(id(variable))
            graph.leaves.append(variable)
        if isinstance(node, BackwardCFunction) and id(node) not in custom_ids:
            custom_ids.add(id(node))
            graph.custom.append(node)
        for edge, (child, _input_nr) in enumerate(getattr(node, "next_functions", ()) or ()):
            if child is None:
                continue
            if isinstance(child, BackwardCFunction):
                graph.producers.setdefault(id(child), []).append((node, edge))
            stack.append(child)
    graph.reached = leaf_ids
    return graph
