"""What a launch reads and writes (gradcheck.tape.launch_access), and the two dependency walks built on it agreeing.

One real tape holds every kind of access a walker must get right: a struct argument whose field the kernel stores
into (declared an input), an in-place update of an input-declared array, a recorded ``wp.copy``, a declared output
the kernel's code never touches, an input only its shape is taken of, a view of a param, and an atomic accumulation
into the loss. observe.dataflow's leftover walk and tape.flow_graph's chain-break walk must find the same
dependencies on it, and the ones that exist.
"""

import warp as wp

from gradcheck.observe.dataflow import influence
from gradcheck.observe.params import tape_leaves
from gradcheck.tape.flow_graph import FlowGraph
from gradcheck.tape.launch_access import copy_access, launch_access, recorded_accesses

wp.init()
N = 4


@wp.struct
class State:
    x: wp.array(dtype=float)
    v: wp.array(dtype=float)


@wp.kernel
def to_state(p: wp.array(dtype=float), s: State):
    i = wp.tid()
    s.x[i] = 2.0 * p[i]  # a struct field stored into: the struct is written, not read


@wp.kernel
def advance(x: wp.array(dtype=float), q: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = x[i] + q[i]  # an input-declared array updated in place


@wp.kernel
def weigh(c: wp.array(dtype=float), r: wp.array(dtype=float), y: wp.array(dtype=float), unused: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = c[i] * float(r.shape[0])  # r: only its shape; unused: declared an output, never touched


@wp.kernel
def scale_half(h: wp.array(dtype=float), z: wp.array(dtype=float)):
    i = wp.tid()
    z[i] = 3.0 * h[i]


@wp.kernel
def total(y: wp.array(dtype=float), z: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i] + z[i % 2])  # accumulated into: loss is written, not read


def _array(n=N):
    return wp.zeros(n, dtype=float, device="cpu", requires_grad=True)


def _tape():
    """The one tape: p → state (struct) → in place with q → copy c → y (and unused); q[0:2] → z; y, z → loss."""
    arrays = {name: _array() for name in ("p", "q", "r", "c", "y", "unused")}
    arrays["p"].assign([1.0, 2.0, 3.0, 4.0])
    arrays["q"].assign([0.5, 0.5, 0.5, 0.5])
    arrays["z"], arrays["loss"] = _array(2), _array(1)
    state = State()
    state.x, state.v = _array(), _array()
    arrays["x"], arrays["v"] = state.x, state.v
    half = arrays["q"][0:2]  # a view of a param: its own object, the param's memory
    a = arrays
    tape = wp.Tape()
    with tape:
        wp.launch(to_state, dim=N, inputs=[a["p"], state], device="cpu")
        wp.launch(advance, dim=N, inputs=[state.x, a["q"]], device="cpu")
        wp.copy(a["c"], state.x)
        wp.launch(weigh, dim=N, inputs=[a["c"], a["r"]], outputs=[a["y"], a["unused"]], device="cpu")
        wp.launch(scale_half, dim=2, inputs=[half], outputs=[a["z"]], device="cpu")
        wp.launch(total, dim=N, inputs=[a["y"], a["z"]], outputs=[a["loss"]], device="cpu")
    return tape, arrays, state, half


def test_each_argument_says_what_the_launch_does_with_it():
    tape, a, state, _half = _tape()
    kinds = [(access.kind, access.what) for access in recorded_accesses(tape.launches)]
    assert kinds == [
        ("launch", to_state.key),
        ("launch", advance.key),
        ("copy", "wp.copy"),
        ("launch", weigh.key),
        ("launch", scale_half.key),
        ("launch", total.key),
    ]

    struct_launch = launch_access(to_state, [a["p"], state], [])
    s = struct_launch.arguments[1]
    assert s.arrays == (state.x, state.v)  # a struct carries its array fields
    assert (s.role.reads, s.role.writes, s.role.output) == (False, True, False)
    assert s.role.shown_write and s.role.may_write

    in_place = launch_access(advance, [state.x, a["q"]], []).role("x")
    assert in_place.reads and in_place.writes and in_place.stores and not in_place.accumulates

    roles = {use.role.name: use.role for use in launch_access(weigh, [a["c"], a["r"]], [a["y"], a["unused"]]).arguments}
    assert not roles["r"].reads  # only its shape
    assert not roles["unused"].writes  # what the code does: nothing
    assert roles["unused"].may_write and roles["unused"].shown_write  # as declared

    loss = launch_access(total, [a["y"], a["z"]], [a["loss"]]).role("loss")
    assert loss.accumulates and not loss.reads

    copy = copy_access(a["c"], state.x)
    assert copy.carried_from() == ([state.x], [a["c"]])


def test_the_leftover_walk_and_the_chain_break_walk_find_the_same_dependencies():
    tape, a, _state, half = _tape()
    sources = [a["p"], a["q"], a["r"]]
    flow = influence(tape, sources)
    graph = FlowGraph(tape, (), extra=sources)

    # the walk gradcheck.diagnose.chain_break takes, from each source alone
    for number, source in enumerate(sources):
        reached = set(graph.walk(graph.canon(source.ptr)).arrival)
        by_leftover_walk = {node for node, found in graph.depends(sources).items() if number in found}
        assert reached == by_leftover_walk, source
        for name, array in a.items():
            assert (number in flow.of(array)) == (graph.canon(array.ptr) in reached), (source, name)

    expected = {
        "p": {"x", "v", "c", "y", "unused", "loss"},  # through the struct, in place, the copy, the accumulation
        "q": {"x", "c", "y", "unused", "z", "loss"},  # z through the view q[0:2]
        "r": set(),  # only its shape is taken: nothing depends on its values
    }
    for number, source in enumerate("pqr"):
        found = {name for name, array in a.items() if number in flow.of(array) and name != source}
        assert found == expected[source], source
    assert flow.of(half) == {1}  # a leftover in the view is a leftover in q


def test_a_tapes_leaves_are_what_its_launches_read_and_none_writes():
    tape, a, state, _half = _tape()
    leaves = {id(array) for array in tape_leaves(tape)}
    assert {id(a["p"]), id(a["q"]), id(a["r"])} <= leaves
    # stored into through a struct, updated in place, a copy's destination, declared outputs
    assert not leaves & {id(state.x), id(state.v), id(a["c"]), id(a["y"]), id(a["unused"]), id(a["loss"])}
