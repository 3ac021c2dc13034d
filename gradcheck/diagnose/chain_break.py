"""Where the chain from a param to the loss breaks, when the param's gradient is zero or absent.

"Why is my gradient zero?" is the question Warp users ask most. The answer is a place in the program: the launch
that read the param before ``with tape:``, the ``wp.copy`` Warp did not record, the intermediate allocated without
``requires_grad``, the kernel built with ``enable_backward=False``, the ``.numpy()`` the values left through, the
``wp.floor`` with no adjoint. This module finds it by walking the dataflow forward from the param toward the loss:

- the edges (gradcheck.tape.flow_graph, over gradcheck.tape.launch_access) are the tape's launches (what each
  reads → what it writes), its recorded copies, and what moved values without the tape
  (gradcheck.observe.unrecorded: launches while no tape recorded, unrecorded copies, host reads), each at its
  place in time: a launch carries a value only if it ran after the value got there;
- if the loss is reached, the path is read from the loss back toward the param, as backward would carry the
  gradient, and the first link backward cannot cross is the break: a link the tape does not hold, a kernel
  without a backward, an array without a gradient buffer. When every link is sound, each launch on the path is
  differentiated alone, on private buffers, with a random seed on its output: the first one that passes the
  param's side nothing is where the gradient stops (and a builtin without an adjoint in its source is named);
- if the loss is not reached, the walk says where the values went instead: to the host (a round trip), or into
  arrays nothing on the tape reads.

A backward seeded with ``tape.backward(grads={y: seed})`` has no loss: its seeded outputs are the roots the walk
looks for, and the findings name them ("the seeded output y"), never a loss the program does not have.

Intermediate gradients after backward cannot tell where it stopped: Warp 1.19's adjoint of a plain store clears
the output's gradient once it has used it, so a healthy intermediate reads zero too (measured). Only arrays the
tape holds (or the program's params) are ever read; events outside the tape are known by data pointer alone.
"""

from __future__ import annotations

from gradcheck.model.seeded import root_words
from gradcheck.model.trace import ChainBreak
from gradcheck.tape.flow_graph import Edge, FlowGraph

CAUSES = {
    "never-read": "no launch reads it",
    "outside-tape": "read by a launch the tape did not record",
    "no-backward": "a kernel built with enable_backward=False",
    "no-grad": "an intermediate without a gradient buffer",
    "host-round-trip": "the values left the device",
    "unrecorded-copy": "a wp.copy Warp did not record",
    "no-adjoint-builtin": "a builtin without an adjoint",
    "zero-adjoint": "a launch whose adjoint passes nothing back",
    "wrong-adjoint": "a launch whose adjoint passes nothing back, in a kernel holding a construct Warp mishandles",
    "dead-end": "the values reach nothing the loss depends on",
    "replaced": "the tape reads a newer array of the param's name",
}
MAX_TESTED = 32  # launches on one path differentiated alone before giving up


def diagnose(tape, loss, grads, targets: dict, events, name_of, recording: int | None = None) -> tuple[ChainBreak, ...]:
    """A ChainBreak for each target (key → array whose gradient is zero or absent) whose break can be placed.
    ``events``: gradcheck.observe.unrecorded events, ``recording`` the number they carry for this tape's."""
    if not targets:
        return ()
    graph = FlowGraph(tape, events, recording, extra=targets.values())
    sinks = {graph.canon(a.ptr) for a in [loss, *(grads or {})] if a is not None and getattr(a, "ptr", None)}
    root = _root(loss, grads, name_of)
    found = []
    for key, array in targets.items():
        if not getattr(array, "ptr", None):
            continue
        result = _diagnose_one(graph, key, array, sinks, name_of, root)
        if result is not None:
            found.append(result)
    return tuple(found)


def _root(loss, grads, name_of) -> str:
    """What the gradient flows back from, as the findings say it: the loss, or the outputs grads= seeded."""
    return root_words(() if loss is not None or not grads else [name_of(a) for a in grads])


def _diagnose_one(graph: FlowGraph, key: str, param, sinks: set, name_of, root: str) -> ChainBreak | None:
    start = graph.canon(param.ptr)
    walk = graph.walk(start)
    arrival, parent, host, readers = walk.arrival, walk.parent, walk.host, walk.readers
    name = name_of(param)
    label = lambda ptr: graph.label(ptr, name_of)  # noqa: E731
    reached = next((s for s in sinks if s in parent), None)
    if reached is not None:
        path = _path(parent, reached, start)
        return _on_path(graph, key, name, path, label, root)
    if not readers:
        return _unread(graph, key, param, name, name_of)
    if host:
        edge, ptr = host[0]
        path = _path(parent, ptr, start)
        through = f" through {', '.join(e.place() for e, _a, _b in path)}" if path else ""
        return ChainBreak(
            key,
            "host-round-trip",
            label(ptr),
            edge.place(),
            None,
            f"{name}'s values reach {label(ptr)}{through}, which is read to the host at {edge.place()} and nothing "
            "on the tape reads it: values that come back as a new wp.array carry no gradient",
            f"compute with a kernel on {label(ptr)} under the tape instead of on its .numpy() copy",
            _arrays(path, label),
        )
    if all(not e.recorded for e in readers):
        edge = readers[0]
        return ChainBreak(
            key,
            "outside-tape",
            name,
            edge.place(),
            None,
            f"{name} is read only by {edge.place()}, launched while no tape was recording, so backward never "
            "differentiates it",
            "make that launch inside `with tape:` (or record it on the same tape)",
        )
    ends = [p for p in arrival if p != start and not any(p in e.reads and e.time > arrival[p] for e in graph.edges)]
    last = max(ends, key=lambda p: arrival[p]) if ends else None
    if last is None:
        return None
    path = _path(parent, last, start)
    return ChainBreak(
        key,
        "dead-end",
        label(last),
        path[-1][0].place() if path else None,
        path[-1][0].index if path else None,
        f"{name}'s values reach {label(last)}, and nothing {root} depends on reads it afterwards",
        f"check that {root} is computed from {label(last)} (or from what {name} should change)",
        _arrays(path, label),
    )


def _unread(graph: FlowGraph, key: str, param, name: str, name_of) -> ChainBreak:
    """No launch reads the param (nothing it reaches is read either): replaced by a newer array, taken to the host
    as a value, or simply never passed."""
    replaced = _replacement(graph, param, name, name_of)
    if replaced is not None:
        return ChainBreak(key, *replaced)
    # float(p.numpy()[0]) handed to a kernel while the tape records: the value is used, the array never read. Said
    # only on evidence: a launch after the read receives one of the param's values as a number (a print is not that)
    start = graph.canon(param.ptr)
    taken = next((e for e in graph.edges if e.kind == "host-read" and start in e.reads and e.time > -0.5), None)
    if taken is not None and _value_passed(graph, param, taken.time):
        return ChainBreak(
            key,
            "never-read",
            name,
            taken.place(),
            None,
            f"no launch reads {name}: its values are read to the host at {taken.place()}, and a value that "
            "reaches a kernel as a Python number carries no gradient",
            f"pass the array {name} to the kernel (a wp.array argument read under the tape), not its value",
        )
    return ChainBreak(
        key,
        "never-read",
        name,
        None,
        None,
        f"no launch reads {name}: neither one the tape recorded nor one gradcheck saw outside it",
        f"pass {name} to the launch that should use it, under the tape",
    )


def _value_passed(graph: FlowGraph, param, after: float) -> bool:
    """A recorded launch after ``after`` takes, as a scalar argument, a number equal to one of the param's values."""
    import numpy as np

    try:
        values = np.asarray(param.numpy(), dtype=np.float64).reshape(-1)
    except Exception:  # noqa: BLE001 - a param that cannot be read gives no evidence
        return False
    if not values.size or values.size > 4096:
        return False
    wanted = set(np.float32(values).tolist())
    for edge in graph.edges:
        if not edge.recorded or edge.kind != "launch" or edge.time <= after:
            continue
        for value in [*edge.entry[3], *edge.entry[4]]:
            if isinstance(value, (float, np.floating)) and float(np.float32(value)) in wanted:
                return True
    return False


def _replacement(graph: FlowGraph, param, name: str, name_of) -> tuple | None:
    """The tape reads another array that goes by the param's name (same shape and type): the program made a new
    one after handing this one out (Newton's ``Model.state()`` inside the tape), and the gradient went there — or,
    through the recorded copy that filled it, into the array it was copied from."""
    shape, dtype = getattr(param, "shape", None), getattr(param, "dtype", None)
    for ptr, array in graph.arrays.items():
        if (
            ptr == graph.canon(param.ptr)
            or getattr(array, "shape", None) != shape
            or getattr(array, "dtype", None) != dtype
        ):
            continue
        if not any(ptr in e.reads for e in graph.edges if e.recorded) or name_of(array) != name:
            continue
        source = next((e for e in graph.edges if e.kind == "copy" and e.recorded and ptr in e.writes), None)
        lands = (
            f"; it is a recorded copy of {graph.label(source.reads[0], name_of)}, whose gradient gets it"
            if source
            else ""
        )
        return (
            "replaced",
            name,
            None,
            None,
            f"the tape never reads this {name}: it reads a newer array of that name, made after this one was handed "
            f"out as the param (allocated again inside the forward){lands}",
            f"allocate {name} once, before the tape (Newton: create states and controls outside it), and hand that "
            "array to the optimizer",
        )
    return None


def _path(parent: dict, end: int, start: int) -> list[tuple[Edge, int, int]]:
    """(edge, from, to) from the start to ``end``."""
    out = []
    node = end
    while node != start and node in parent and len(out) < 100_000:
        edge, came = parent[node]
        out.append((edge, came, node))
        node = came
    return out[::-1]


def _arrays(path, label) -> tuple[str, ...]:
    return tuple(label(b) for _e, _a, b in path)


def _on_path(graph: FlowGraph, key: str, name: str, path, label, root: str = "the loss") -> ChainBreak | None:
    """The loss is reached along ``path``: the first link (from the loss back) backward cannot cross."""
    arrays = _arrays(path, label)
    for position in range(len(path) - 1, -1, -1):
        edge, a, _b = path[position]
        if not edge.recorded:
            return _unrecorded(graph, key, name, path, position, label, arrays, root)
        if edge.why == "no-backward":
            return ChainBreak(
                key,
                "no-backward",
                label(a),
                edge.place(),
                edge.index,
                f"{edge.place()}, a kernel built with enable_backward=False, is on the path from {name} to "
                f"{root}: backward skips it, so nothing reaches {label(a)}",
                f"build {edge.what} with enable_backward=True (the default), or give it a @wp.func_grad",
                arrays,
            )
        array = graph.arrays.get(a)
        if array is not None and a != path[0][1] and getattr(array, "grad", None) is None:
            before = path[position - 1][0] if position > 0 else None
            if before is not None and before.kind == "copy" and not before.recorded:  # the copy is what was written
                return _unrecorded(graph, key, name, path, position - 1, label, arrays, root)
            return ChainBreak(
                key,
                "no-grad",
                label(a),
                edge.place(),
                edge.index,
                f"{label(a)}, between {name} and {root}, has no gradient buffer (allocated with "
                f"requires_grad=False): {edge.place()} cannot pass the gradient back into it",
                f"allocate {label(a)} with requires_grad=True",
                arrays,
            )
    return _zero_adjoint(graph, key, name, path, label, arrays)


def _unrecorded(
    graph: FlowGraph, key: str, name: str, path, position: int, label, arrays, root: str = "the loss"
) -> ChainBreak:
    """The link at ``position`` (the one nearest the loss that the tape does not hold), with the unrecorded links
    right before it (a run of launches made before ``with tape:``)."""
    edge, a, _b = path[position]
    # wp.array(x.numpy()): on the CPU one copy from x's own memory; on CUDA numpy() copies x to a host buffer and
    # wp.array copies that back: the run of unrecorded copies back to the array the program read to the host
    first = position
    while first > 0 and path[first - 1][0].kind == "copy" and not path[first - 1][0].recorded:
        first -= 1
    upstream = {path[j][1] for j in range(first, position + 1)}
    host = next(
        (h for h in graph.edges if h.kind == "host-read" and upstream & set(h.reads) and h.time < edge.time), None
    )
    if host is not None:
        a = next(p for p in host.reads if p in upstream)
    if edge.kind == "copy" and host is not None:
        back = "there" if host.site == edge.site else f"through {edge.place()}"
        return ChainBreak(
            key,
            "host-round-trip",
            label(a),
            host.place(),
            None,
            f"{label(a)} is read to the host at {host.place()} and its values come back into a new array {back}: "
            "an array made from host values carries no gradient back",
            f"compute with a kernel on {label(a)} under the tape instead of on its .numpy() copy",
            arrays,
        )
    if edge.kind == "copy":
        return ChainBreak(
            key,
            "unrecorded-copy",
            label(a),
            edge.place(),
            None,
            f"{label(a)} reaches {root} through {edge.place()}, which Warp did not record ({edge.why}; it records "
            "a copy only while a tape records and both arrays have a gradient): the gradient stops there",
            "give both arrays of that copy requires_grad=True and copy under the tape, or do the copy with a kernel "
            "under the tape",
            arrays,
        )
    first = position
    while first > 0 and not path[first - 1][0].recorded and path[first - 1][0].kind == "launch":
        first -= 1
    run = [e for e, _a, _b in path[first : position + 1]]
    start = path[first][1]
    places = ", ".join(e.place() for e in run)
    launched, them = ("", "it") if len(run) == 1 else ("each ", "them")
    return ChainBreak(
        key,
        "outside-tape",
        label(start),
        places,
        None,
        f"{label(start)} reaches {root} through {places}, {launched}{_unrecorded_why(run)}: backward never "
        f"differentiates {them}, so the gradient stops there",
        "make " + ("that launch" if len(run) == 1 else "those launches") + " inside `with tape:`",
        arrays,
    )


def _zero_adjoint(graph: FlowGraph, key: str, name: str, path, label, arrays) -> ChainBreak | None:
    """Every link is on the tape, with a backward and gradient buffers: the launch whose adjoint passes nothing back
    to the param's side, differentiated alone (from the param toward the loss)."""
    from gradcheck.source.gradient_stops import gradient_stops

    for edge, a, b in path[:MAX_TESTED]:
        if edge.kind != "launch":
            continue
        passes = _passes_gradient(graph, edge, a, b)
        if passes is None or passes:
            continue
        stops = gradient_stops(edge.kernel)
        if stops:
            from gradcheck.model.sites import short

            calls = ", ".join(f"{text} ({short(where)})" for text, where in stops[:3])
            return ChainBreak(
                key,
                "no-adjoint-builtin",
                label(a),
                edge.place(),
                edge.index,
                f"{edge.place()} passes no gradient from {label(b)} back to {label(a)}: its code calls {calls}, "
                "which Warp differentiates as a constant",
                "keep the value differentiable on the gradient's path (a smooth surrogate, or a straight-through "
                "@wp.func_grad) or do not learn it through this launch",
                arrays,
            )
        mishandled = _mishandled(edge.kernel)
        if mishandled is not None:
            where, construct, bug = mishandled
            return ChainBreak(
                key,
                "wrong-adjoint",
                label(a),
                edge.place(),
                edge.index,
                f"{edge.place()} passes no gradient from {label(b)} back to {label(a)}, and {edge.what} holds a "
                f"construct Warp differentiates wrongly: {where}: {construct} ({bug.issue})",
                bug.workaround,
                arrays,
            )
        return ChainBreak(
            key,
            "zero-adjoint",
            label(a),
            edge.place(),
            edge.index,
            f"{edge.place()} passes no gradient from {label(b)} back to {label(a)}: its derivative there is zero "
            "(a clamp, max or branch that does not depend on it at these values)",
            f"check how {edge.what} uses {label(a)}",
            arrays,
        )
    return None


def _mishandled(kernel) -> tuple | None:
    """(file:line, construct, bug) of the first construct in ``kernel`` that the running Warp differentiates wrongly
    (gradcheck.source.kernel_patterns, gradcheck.model.known_bugs): a zero adjoint there is Warp's, not the math's."""
    import warp as wp

    from gradcheck.model import known_bugs
    from gradcheck.model.sites import short
    from gradcheck.source.kernel_patterns import suspects

    try:
        found = suspects(kernel)
    except Exception:  # noqa: BLE001 - a kernel whose source cannot be read names no construct
        return None
    for suspect in found:
        bug = getattr(known_bugs, suspect.bug, None)
        if bug is not None and bug.affects(getattr(wp, "__version__", None)):
            return short(suspect.where) if suspect.where else _kernel_name(kernel), suspect.what, bug
    return None


def _kernel_name(kernel) -> str:
    return getattr(kernel, "key", None) or getattr(kernel, "__name__", "the kernel")


def _passes_gradient(graph: FlowGraph, edge: Edge, a: int, b: int) -> bool | None:
    """Does the launch's adjoint, seeded with random values on ``b``, give ``a`` a nonzero adjoint? On private
    copies (gradcheck.rerun.adjoint_dependence): the program's arrays and gradients are left as they are. None: it
    could not be run (a struct argument, whose adjoint struct is not rebuilt here; a failure)."""
    import numpy as np

    from gradcheck.rerun.adjoint_dependence import private_adjoint, random_like
    from gradcheck.warp_compat import array_class, is_struct_instance, recorded_call

    call = recorded_call(edge.entry)
    arguments = call.arguments()
    if any(is_struct_instance(value) for _, value in arguments):
        return None
    array_type = array_class()

    def named(node: int) -> list[str]:
        return [
            name
            for name, value in arguments
            if issubclass(type(value), array_type) and getattr(value, "ptr", None) and graph.canon(value.ptr) == node
        ]

    sources, seeded = named(a), named(b)
    if not sources or not seeded:
        return None
    rng = np.random.default_rng(0)
    values = dict(arguments)
    try:
        adjoints = private_adjoint(call, arguments, {name: random_like(values[name], rng) for name in seeded})
    except Exception:  # noqa: BLE001 - a launch that cannot be replayed here is not diagnosed
        return None
    found = [adjoints[name] for name in sources if name in adjoints]
    return any(bool(np.any(x != 0)) for x in found) if found else None


def _unrecorded_why(edges) -> str:
    """How the launches got off the tape, as the observer saw it ("launched while no tape was recording")."""
    whys = list(dict.fromkeys(e.why for e in edges if e.why))
    return " / ".join(whys) if whys else "launched off the tape"
