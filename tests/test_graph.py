"""``--graph FILE``: one backward's dataflow drawn as Graphviz dot with what is wrong marked on it.

The renderer on hand-built pictures and findings built with the checks' own evidence types (the marks each
declares, dot's escaping, the cut a rollout-sized picture gets; tests/test_typed_evidence.py draws real check
output), then end to end: ``gradcheck exec`` on the broken-chain training script (the
enable_backward=False launch is the red break, the clean twin has no red), ``gradcheck run lights --fault
backward-off`` to an .svg (drawn by dot, or the dot source beside it with one line saying so), and the usage
errors. Every dot text is read back by a small parser of the subset the writer emits, so a quote or newline that
slipped through unescaped fails the test even where Graphviz is not installed; where it is, dot draws it too.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import fields

import pytest
from conftest import TESTS, cli

from gradcheck.checks.adjoint_mismatch import AdjointMismatchEvidence
from gradcheck.checks.changed_before_backward import ChangedBeforeBackwardEvidence
from gradcheck.checks.explosion import NormExplosion
from gradcheck.checks.missing_gradient import MissingParamGradient
from gradcheck.checks.nonfinite import NonfiniteGradient
from gradcheck.formats.dot_graph import MAX_NODES, RECENT_LAUNCHES, render, write_graph
from gradcheck.model.dataflow import Dataflow, DataflowLink, DataflowNode
from gradcheck.model.findings import Finding, Severity

BROKEN_CHAIN = str(TESTS / "programs" / "exec" / "broken_chain.py")
DOT = shutil.which("dot")
RED = 'color="red"'

_Q = r'"(?:[^"\\\n]|\\.)*"'
_ATTRS = rf"\[(?:\w+={_Q}(?:, \w+={_Q})*)?\]"
_NODE = re.compile(rf"  ({_Q}) ({_ATTRS})")
_EDGE = re.compile(rf"  ({_Q}) -> ({_Q})(?: ({_ATTRS}))?")
_DEFAULTS = re.compile(rf"  (graph|node|edge) ({_ATTRS})")


def parse(text: str) -> tuple[dict, list, dict]:
    """(nodes: key → attributes, edges: (source, target, attributes), graph attributes) of the writer's dot; any
    line outside the grammar it writes fails."""

    def unquote(quoted: str) -> str:
        return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), quoted[1:-1])

    def attrs(text: str | None) -> dict:
        return {k: unquote(v) for k, v in re.findall(rf"(\w+)=({_Q})", text or "")}

    lines = text.splitlines()
    assert lines[0] == "digraph gradcheck {" and lines[-1] == "}", text[:200]
    nodes, edges, graph = {}, [], {}
    for line in lines[1:-1]:
        if m := _DEFAULTS.fullmatch(line):
            graph |= attrs(m.group(2)) if m.group(1) == "graph" else {}
        elif m := _EDGE.fullmatch(line):
            edges.append((unquote(m.group(1)), unquote(m.group(2)), attrs(m.group(3))))
        elif m := _NODE.fullmatch(line):
            nodes[unquote(m.group(1))] = attrs(m.group(2))
        else:
            raise AssertionError(f"not dot the writer emits: {line!r}")
    undeclared = {end for s, t, _a in edges for end in (s, t)} - set(nodes)
    assert not undeclared, f"edges to nodes never declared: {undeclared}"
    return nodes, edges, graph


def launch(key, label, index, site="/w/train.py:10", why=None, order=None):
    return DataflowNode(key, "launch", label, float(index if order is None else order), site, index, why)


def array(key, label, has_grad=True, loss=False):
    return DataflowNode(key, "array", label, has_grad=has_grad, loss=loss)


def links(*pairs):
    """("a", "t0") is a read, ("t0", "b") a write: launches' keys start with t or e; a third item is the kernel
    argument the array was passed as."""
    return tuple(DataflowLink(p[0], p[1], "write" if p[0][0] in "te" else "read", *p[2:]) for p in pairs)


# x → scale → y;  y, offset → shift_forward_only (no backward) → z;  z, target → squared_error → loss; an
# unrecorded launch before the tape writes offset
CHAIN = Dataflow(
    1,
    (
        launch("e0", "init", None, "/w/train.py:5", why="no tape was recording", order=-1),
        launch("t0", "scale", 0, "/w/train.py:20"),
        launch("t1", "shift_forward_only", 1, "/w/train.py:21", why="no-backward"),
        launch("t2", "squared_error", 2, "/w/train.py:22"),
        array("ax", "x", has_grad=False),
        array("ag", "gain"),
        array("ay", "y"),
        array("ao", "offset"),
        array("az", "z"),
        array("at", "target", has_grad=False),
        array("al", "loss", loss=True),
    ),
    links(
        ("e0", "ao"),
        ("ax", "t0"),
        ("ag", "t0"),
        ("t0", "ay"),
        ("ay", "t1"),
        ("ao", "t1"),
        ("t1", "az"),
        ("az", "t2", "z"),
        ("at", "t2", "target"),
        ("t2", "al", "loss"),
    ),
    loss="al",
)


def finding(check, evidence, subject="offset.grad", severity=Severity.ERROR):
    return Finding(check, severity, subject, f"{check} on {subject}", "fix it", evidence)


def broken(subject="offset.grad", **found) -> Finding:
    """missing-gradient's evidence with the break ``found`` (cause, array, launch, index, path)."""
    name = subject.removesuffix(".grad")
    evidence = MissingParamGradient("all-zero", [name], [subject], 1, 1, "declared", chain_break=found)
    return finding("missing-gradient", evidence, subject)


def origin(check, **where) -> Finding:
    """nonfinite's or explosion's evidence with an ``origin`` (index, kernel, site, array)."""
    where = {"step": 1, "steps": 1, "array": None, "value": None} | where
    if check == "nonfinite":
        evidence = NonfiniteGradient(1, None, "declared", [1], [0], True, 1.0, True, False, None, ["offset.grad"],
                                     where, [1.0], 1, [1], 1)  # fmt: skip
    else:
        evidence = NormExplosion(1e6, False, 2e6, False, 1, None, [1], 1, origin=where)
    return finding(check, evidence)


def blamed(launches, severity=Severity.ERROR) -> Finding:
    evidence = AdjointMismatchEvidence(launches, len(launches), {}, [], "test", None, 0.0)
    return finding("adjoint-mismatch", evidence, "launch #0 scale (train.py:20)", severity)


def changed(subject, reader_indices=()) -> Finding:
    evidence = ChangedBeforeBackwardEvidence([subject], [], 0, reader_indices, 1, None, 1, 1, [1])
    return finding("changed-before-backward", evidence, subject)


BREAK = broken(cause="no-backward", array="offset", launch="shift_forward_only (train.py:21)", index=1,
               path=["z", "loss"])  # fmt: skip


def test_each_node_looks_like_what_it_is_to_backward():
    nodes, edges, graph = parse(render(CHAIN))
    assert nodes["t0"]["shape"] == "box" and nodes["t0"]["label"] == "scale\ntrain.py:20 (#0)"
    assert "dashed" in nodes["e0"]["style"] and "off the tape: no tape was recording" in nodes["e0"]["label"]
    assert nodes["t1"]["fillcolor"] == "gray85" and "enable_backward=False" in nodes["t1"]["label"]
    assert nodes["ax"]["shape"] == "ellipse" and nodes["ax"]["style"] == "dotted"  # no .grad buffer
    assert nodes["al"]["peripheries"] == "2" and "style" not in nodes["ay"]
    assert ("ay", "t1", {}) in edges and ("t1", "az", {}) in edges  # read: array → launch; write: launch → array
    assert RED not in render(CHAIN) and graph["label"] == "gradcheck: the dataflow of backward 1"


def test_the_chain_break_is_red_with_its_cause_on_the_link():
    nodes, edges, graph = parse(render(CHAIN, [BREAK]))
    for key in ("t1", "ao"):  # the launch and the array at the break
        assert nodes[key]["color"] == "red" and nodes[key]["tooltip"].startswith("missing-gradient on offset.grad")
    (cause,) = [(s, t, a) for s, t, a in edges if a.get("label")]
    assert cause == ("ao", "t1", cause[2]) and cause[2]["label"] == "no-backward" and cause[2]["color"] == "red"
    assert nodes["az"]["penwidth"] == "2" and "color" not in nodes["az"]  # the path to the loss: bold, not red
    assert "breaks at shift_forward_only (train.py:21) (no-backward): offset.grad" in graph["label"]


@pytest.mark.parametrize(
    ("marked", "key", "color"),
    [
        (
            origin("nonfinite", index=2, kernel="squared_error", site="/w/train.py:22", array="squared_error.z.grad"),
            "az",
            "darkorange",
        ),
        # the tape position disagrees with the kernel (another backward's tape): kernel and site decide
        (origin("explosion", index=0, kernel="shift_forward_only", site="/x/train.py:21"), "t1", "darkorange"),
        (blamed([{"index": 0, "kernel": "scale", "where": "/w/train.py:20", "status": "mismatch"}]), "t0", "red"),
        (changed("y", reader_indices=[1]), "ay", "purple"),
    ],
)
def test_what_each_check_marks(marked, key, color):
    nodes, edges, graph = parse(render(CHAIN, [marked]))
    assert nodes[key]["color"] == color, nodes[key]
    if marked.check == "nonfinite":  # the launch, and the array whose adjoint it made NaN
        assert nodes["t2"]["color"] == color and "color" not in nodes["at"]
    assert graph["label"].count("\n") == 1  # one legend line under the title
    if marked.check == "adjoint-mismatch":
        assert nodes[key]["style"] == "bold"
    if marked.check == "changed-before-backward":  # the link to the launch backward replays with the new values
        assert ("ay", "t1") in [(s, t) for s, t, a in edges if a.get("color") == "purple"]


def test_a_mark_the_picture_cannot_place_draws_nothing_red():
    elsewhere = broken(cause="outside-tape", array="w", index=None, launch="other (elsewhere.py:3)", path=[])
    quiet = blamed([{"index": 0, "status": "mismatch"}], severity=Severity.INFO)  # an info's launch is not marked
    assert RED not in render(CHAIN, [elsewhere, quiet])


def test_a_read_to_the_host_is_drawn_only_where_it_breaks_a_chain():
    host = DataflowNode("e9", "host-read", "numpy()", 1.5, "/w/train.py:10", None, "values left the device")
    extra = (*links(("ay", "e9")), DataflowLink("aq", "e9", "read"))
    printed = Dataflow(1, (*CHAIN.nodes, host, array("aq", "printed_only")), (*CHAIN.links, *extra), "al")
    nodes, _edges, _graph = parse(render(printed))
    assert "e9" not in nodes and "aq" not in nodes and "ay" in nodes  # a print moves nothing
    host_trip = broken(cause="host-round-trip", array="y", index=None, launch="numpy() (train.py:10)", path=[])
    nodes, edges, _graph = parse(render(printed, [host_trip]))
    assert nodes["e9"]["color"] == "red"
    assert [a["label"] for s, t, a in edges if (s, t) == ("ay", "e9")] == ["host-round-trip"]


def test_labels_are_escaped_for_dot():
    odd = 'state["q"] \\ x\nline\ttwo\r'
    picture = Dataflow(
        2,
        (launch("t0", 'k"\\', 0, site='C:\\w\\"odd".py:7'), array("a0", odd, loss=True)),
        links(("t0", "a0")),
        loss="a0",
    )
    nodes, _edges, _graph = parse(render(picture, [changed(odd)]))
    assert nodes["a0"]["label"] == 'state["q"] \\ x\nline two\n'
    assert nodes["t0"]["label"].startswith('k"\\\n')


def _rollout(launches: int) -> Dataflow:
    """a0 → t0 → a1 → t1 → … → a{n} (the loss): a picture past MAX_NODES."""
    nodes = [launch(f"t{i}", "step", i, f"/w/sim.py:{i}") for i in range(launches)]
    nodes += [array(f"a{i}", f"states[{i}]", loss=i == launches) for i in range(launches + 1)]
    pairs = [p for i in range(launches) for p in ((f"a{i}", f"t{i}"), (f"t{i}", f"a{i + 1}"))]
    return Dataflow(1, tuple(nodes), links(*pairs), loss=f"a{launches}")


def test_a_large_picture_keeps_what_is_marked_and_says_what_it_left_out():
    far = broken("states[0].grad", cause="no-grad", array="states[500]", launch="step (sim.py:500)", index=500,
                 path=["states[501]"])  # fmt: skip
    nodes, _edges, _graph = parse(render(_rollout(1000), [far]))
    assert len(nodes) <= MAX_NODES + 1 and nodes["t500"]["color"] == "red" and nodes["a500"]["color"] == "red"
    assert {"a0", "t0", "a499", "t499", "t501", "a502", "t999", "a1000"} <= set(nodes)  # the marks, the param, loss
    assert "t400" not in nodes and "t497" not in nodes
    drawn = sum(1 for k in nodes if k.startswith("t"))
    assert nodes["not-drawn"]["label"].startswith(f"{1000 - drawn} launches and ")


def test_a_large_picture_without_marks_draws_the_last_launches_before_the_loss():
    nodes, _edges, _graph = parse(render(_rollout(1000)))
    drawn = sorted(int(k[1:]) for k in nodes if k.startswith("t"))
    assert drawn == list(range(1000 - len(drawn), 1000)) and 100 < len(drawn) <= RECENT_LAUNCHES and "a1000" in nodes
    assert len(nodes) <= MAX_NODES + 1 and nodes["not-drawn"]["label"].startswith(f"{1000 - len(drawn)} launches ")


@pytest.mark.skipif(DOT is None, reason="Graphviz's dot program is not installed here (apt install graphviz)")
def test_dot_draws_the_picture(tmp_path):
    source = render(_rollout(400), [BREAK])
    done = subprocess.run([DOT, "-Tsvg"], input=source, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "<svg" in done.stdout, done.stderr
    assert write_graph(tmp_path / "g.svg", CHAIN, [BREAK]) is None and "<svg" in (tmp_path / "g.svg").read_text()


def test_without_dot_an_svg_becomes_its_dot_source_beside_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot on it
    said = write_graph(tmp_path / "g.svg", CHAIN, [BREAK])
    assert not (tmp_path / "g.svg").exists() and "\n" not in said
    assert "dot program is not installed" in said and str(tmp_path / "g.dot") in said
    parse((tmp_path / "g.dot").read_text())
    assert write_graph(tmp_path / "g.gv", CHAIN) is None and (tmp_path / "g.gv").read_text() == render(CHAIN)


def test_the_picture_holds_labels_only():
    """Taken from a real tape in this process: strings, numbers and bools, never an array (it outlives them)."""
    from gradcheck.engine.program_audit import audit_program
    from gradcheck.model import dataflow

    with dataflow.collecting() as kept:
        result, run = audit_program(BROKEN_CHAIN, ["--cause", "before-tape", "--iters", "2"])
    assert run.status in (None, 0), run.error
    ((name, picture),) = kept
    assert name == result.name and picture.backward in (1, 2)
    values = [getattr(item, f.name) for item in (*picture.nodes, *picture.links) for f in fields(item)]
    assert all(v is None or type(v) in (str, int, float, bool) for v in values)
    nodes, _edges, _graph = parse(render(picture, result.findings))
    (shift,) = [k for k, a in nodes.items() if a["label"].startswith("shift\n")]  # launched before `with tape:`
    assert "dashed" in nodes[shift]["style"] and nodes[shift]["color"] == "red"


def _graph_run(*args: str):
    proc = cli(*args, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.startswith("gradcheck:")]
    return proc, lines


@pytest.mark.parametrize("cause", ["no-backward", "clean"])
def test_exec_draws_the_break_of_a_training_script(tmp_path, cause):
    out = tmp_path / "chain.dot"
    proc, said = _graph_run("exec", "--graph", str(out), BROKEN_CHAIN, "--cause", cause)
    assert "iter 0: loss " in proc.stdout and said == [], proc.stderr[-2000:]  # the program's own output
    assert proc.returncode == (1 if cause != "clean" else 0)
    nodes, _edges, _graph = parse(out.read_text())
    red = sorted(a["label"].split("\n")[0] for a in nodes.values() if a.get("color") == "red")
    assert red == (["offset", "shift_forward_only", "y"] if cause != "clean" else []), red  # gain's break is at y
    if cause == "clean":
        assert RED not in out.read_text()


@pytest.mark.slow  # a whole process (or Newton's kernels): the long lane
def test_run_draws_an_svg_or_says_in_one_line_that_it_wrote_dot(tmp_path):
    out = tmp_path / "lights.svg"
    proc, said = _graph_run(
        "run",
        "lights",
        "--fault",
        "backward-off",
        "--passes",
        "1",
        "--fd",
        "off",
        "--no-replay",
        "--blame",
        "off",
        "--graph",
        str(out),
    )
    assert proc.returncode == 1 and "missing-gradient" in proc.stdout, proc.stderr[-2000:]
    if DOT is not None:
        assert said == [] and "<svg" in out.read_text()
        return
    assert not out.exists() and len(said) == 1 and said[0].startswith("gradcheck: note: --graph: ")
    nodes, _edges, _graph = parse((tmp_path / "lights.dot").read_text())
    (gather,) = [a for a in nodes.values() if a["label"].startswith("gather_light_forward_only\n")]
    assert gather["color"] == "red" and gather["fillcolor"] == "gray85"


@pytest.mark.parametrize("where", ["directory", "no-such-folder", "the-report"])
@pytest.mark.parametrize("command", ["run", "exec"])
def test_a_graph_path_that_cannot_be_written_is_a_usage_error(tmp_path, where, command):
    graph = {"directory": tmp_path, "no-such-folder": tmp_path / "no" / "g.dot", "the-report": tmp_path / "r.txt"}
    args = ["--graph", str(graph[where]), "--output", str(tmp_path / "r.txt")]
    target = ["run", "lights", *args] if command == "run" else ["exec", *args, BROKEN_CHAIN]
    proc, said = _graph_run(*target)
    assert proc.returncode == 2 and len(said) == 1 and "--graph" in said[0], proc.stderr
    assert "Traceback" not in proc.stderr and "iter 0" not in proc.stdout  # refused before anything ran


def test_no_audited_backward_is_said_and_nothing_written(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text("print('no warp here')\n")
    proc, said = _graph_run("exec", "--graph", str(tmp_path / "g.dot"), str(script))
    assert proc.returncode == 0 and proc.stdout.startswith("no warp here\n")
    assert len(said) == 1 and "no backward was audited" in said[0] and not (tmp_path / "g.dot").exists()
