"""``--graph FILE``: one backward's dataflow (gradcheck.model.dataflow) as Graphviz dot, with what is wrong marked.

Warp's ``Tape.visualize`` draws a tape; this draws what the checks found on it, read from the marks their findings'
evidence declares (gradcheck.model.evidence; a mark is named by what it is, never by the check that made it):

- ChainBreak: the chain break, red (the array and the launch, the cause on the link between them), and the path
  from the param to the loss drawn bold;
- Origin: the first launch whose adjoint went NaN/Inf or past the norm, orange;
- ChangedArrays: the array that changed, purple, with its links to the launches backward replays;
- BlamedLaunch (of a warning or an error): the launch whose adjoint disagrees with its finite differences, red
  and bold.

Launches are boxes (``kernel``, ``file.py:LINE (#tape position)``), arrays ellipses; a launch off the tape is
dashed with how it got there, an ``enable_backward=False`` kernel grey, an array without a gradient buffer dotted,
the loss doubled. A picture of more than MAX_NODES nodes (a rollout records thousands) keeps what is marked and
its neighbourhood, or without marks the last launches before the loss, and says how much it left out: a picture
nobody can read helps nobody.

Not a ``--format``: an artifact beside the report, like ``ci --junit``. SVG and PNG need Graphviz's ``dot``
program; without it the dot source is written beside (``FILE.dot``) and the caller is told so in one line.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from gradcheck.model.dataflow import Dataflow, DataflowLink, DataflowNode
from gradcheck.model.evidence import BlamedLaunch, ChainBreak, ChangedArrays, Origin
from gradcheck.model.findings import Severity

MAX_NODES = 300  # more than this and the picture is cut down to what matters
RECENT_LAUNCHES = 150  # without a mark: the launches before the loss drawn
HOPS = 2  # around a marked node: how far its neighbourhood reaches
HUB = 8  # a node with more links than this is not gone through on the way out of a neighbourhood
DOT_SECONDS = 60.0  # dot's deadline: a picture is not worth a hung CI job
DRAWN = ("svg", "png")  # suffixes dot renders; any other file gets the dot source

BREAK, ORIGIN, CHANGED, BLAMED = "red", "darkorange", "purple", "red"


@dataclass
class Marks:
    """What the findings mark on a picture: attributes per node key and per link, the nodes a cut-down picture
    keeps with their neighbourhood, and one legend line per finding."""

    nodes: dict[str, dict] = field(default_factory=dict)
    links: dict[tuple[str, str], dict] = field(default_factory=dict)
    focus: list[str] = field(default_factory=list)
    said: dict[str, list[str]] = field(default_factory=dict)  # legend line → the subjects it is about

    def node(self, key: str, focus: bool = True, **attrs) -> None:
        """Mark a node; two findings on one node both keep their tooltip (the message)."""
        mine = self.nodes.setdefault(key, {})
        tip = attrs.pop("tooltip", None)
        if tip and tip not in mine.get("tooltip", "").split("\n\n"):
            mine["tooltip"] = f"{mine['tooltip']}\n\n{tip}" if mine.get("tooltip") else tip
        attrs["penwidth"] = max(attrs.get("penwidth", 0), mine.get("penwidth", 0)) or None  # the strongest mark
        mine.update({k: v for k, v in attrs.items() if v is not None})
        if focus and key not in self.focus:
            self.focus.append(key)

    def say(self, line: str, subject: str) -> None:
        """A legend line; findings that mark the same place (a family of params) share it."""
        subjects = self.said.setdefault(line, [])
        if subject not in subjects:
            subjects.append(subject)

    @property
    def legend(self) -> list[str]:
        return [f"{line}: {', '.join(s[:3])}" + _more(len(s) - 3) for line, s in self.said.items()]


def _more(count: int) -> str:
    return f" and {count} more" if count > 0 else ""


@dataclass(frozen=True)
class Drawing:
    """What a picture shows, before any drawing syntax: the nodes kept with their look (dot attributes, marks
    over the node's own style), the links between them with their marks, the legend, and what was left out.
    Graphviz's dot source (``render``) and the report page's SVG (formats.svg_dataflow) both draw this."""

    backward: int
    legend: tuple[str, ...]
    nodes: tuple[tuple[DataflowNode, dict], ...]
    links: tuple[tuple[DataflowLink, dict], ...]
    hidden: str | None  # "N launches and M arrays not drawn …"; None when everything is

    @property
    def title(self) -> str:
        return f"gradcheck: the dataflow of backward {self.backward}"


def drawing(dataflow: Dataflow, findings=(), limit: int = MAX_NODES) -> Drawing:
    """``dataflow`` with what ``findings`` say is wrong marked on it, cut down to what is worth drawing: ``limit``
    nodes at most (the report page draws fewer than Graphviz can lay out)."""
    marks = mark(dataflow, findings)
    kept, hidden = _select(dataflow, marks, limit)
    nodes = tuple(
        (node, _merged(_style(node, dataflow), marks.nodes.get(node.key)))
        for node in dataflow.nodes
        if node.key in kept
    )
    links = tuple(
        (link, marks.links.get((link.source, link.target), {}))
        for link in dataflow.links
        if link.source in kept and link.target in kept
    )
    return Drawing(dataflow.backward, tuple(marks.legend), nodes, links, hidden)


def render(dataflow: Dataflow, findings=()) -> str:
    """The dot source of ``dataflow`` with what ``findings`` say is wrong marked on it."""
    drawn = drawing(dataflow, findings)
    title = "\n".join([drawn.title, *drawn.legend])
    lines = [
        "digraph gradcheck {",
        "  graph " + _attrs(rankdir="LR", fontname="Helvetica", fontsize=11, labelloc="t", labeljust="l", label=title),
        "  node " + _attrs(fontname="Helvetica", fontsize=10),
        "  edge " + _attrs(fontname="Helvetica", fontsize=9, color="gray40"),
    ]
    lines += [f"  {_quote(node.key)} " + _attrs(**attrs) for node, attrs in drawn.nodes]
    if drawn.hidden:
        lines.append('  "not-drawn" ' + _attrs(shape="note", style="dashed", color="gray50", label=drawn.hidden))
    for link, attrs in drawn.links:
        lines.append(f"  {_quote(link.source)} -> {_quote(link.target)}" + (" " + _attrs(**attrs) if attrs else ""))
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_graph(path, dataflow: Dataflow, findings=()) -> str | None:
    """Write the picture to ``path``: drawn by ``dot`` for .svg and .png, else the dot source. Returns a one-line
    note for stderr when the file written is not the one asked for (no ``dot``: the source beside it, as
    FILE.dot). Raises OSError when nothing could be written."""
    import shutil
    import subprocess

    path = Path(path)
    text = render(dataflow, findings)
    kind = path.suffix.lower().lstrip(".")
    if kind not in DRAWN:
        _write(path, text.encode("utf-8"))
        return None
    dot = shutil.which("dot")
    why = "Graphviz's dot program is not installed"
    if dot is not None:
        try:
            done = subprocess.run(
                [dot, f"-T{kind}"], input=text.encode("utf-8"), capture_output=True, timeout=DOT_SECONDS, check=False
            )
        except subprocess.TimeoutExpired:
            why = f"dot did not finish within {DOT_SECONDS:g} s"
        except OSError as exc:
            why = f"dot could not be started ({exc.strerror or exc})"
        else:
            if done.returncode == 0 and done.stdout:
                _write(path, done.stdout)
                return None
            said = done.stderr.decode("utf-8", "replace").strip().splitlines()
            why = f"dot failed ({said[0] if said else f'exit status {done.returncode}'})"
    source = path.with_suffix(".dot")
    _write(source, text.encode("utf-8"))
    return (
        f"--graph: {why}, so {path} was not drawn; wrote its dot source to {source} (dot -T{kind} {source} -o {path})"
    )


# -- what the findings mark ----------------------------------------------------------------------------------------
def mark(dataflow: Dataflow, findings) -> Marks:
    """The marks of every finding the picture can show, as its evidence declares them (``Evidence.marks``)."""
    marks = Marks()
    where = _Index(dataflow)
    for finding in findings:
        found = finding.evidence.marks
        for mark_ in found:
            if isinstance(mark_, ChainBreak):
                _break(marks, where, finding, mark_)
            elif isinstance(mark_, Origin):
                _origin(marks, where, finding, mark_)
            elif isinstance(mark_, ChangedArrays) and mark_.arrays:
                _changed(marks, where, finding, mark_)
        blamed = [m for m in found if isinstance(m, BlamedLaunch)]
        if blamed and finding.severity >= Severity.WARNING:  # an info's launch (a split adjoint) is not wrong
            _blamed(marks, where, finding, blamed)
    if dataflow.loss is not None and dataflow.loss not in marks.focus:
        marks.focus.append(dataflow.loss)
    return marks


class _Index:
    """Nodes by what evidence calls them: array labels, tape positions, ``kernel (file.py:LINE)`` places."""

    def __init__(self, dataflow: Dataflow) -> None:
        self.labels: dict[str, list[str]] = {}
        self.tape: dict[int, DataflowNode] = {}
        self.places: dict[str, list[str]] = {}
        for node in dataflow.nodes:
            if not node.is_launch:
                self.labels.setdefault(node.label, []).append(node.key)
                continue
            if node.index is not None:
                self.tape[node.index] = node
            self.places.setdefault(_place(node), []).append(node.key)
        self.links = {(link.source, link.target) for link in dataflow.links}
        self.passed: dict[tuple[str, str], list[str]] = {}  # (launch, argument) → the arrays passed as it
        for link in dataflow.links:
            if link.argument:
                launch, node = (link.target, link.source) if link.kind == "read" else (link.source, link.target)
                passed = self.passed.setdefault((launch, link.argument), [])
                if node not in passed:
                    passed.append(node)

    def arrays(self, labels) -> list[str]:
        found = []
        for label in labels:
            for key in self.labels.get(str(label), ()):
                if key not in found:
                    found.append(key)
        return found

    def launch(self, index, kernel=None, site=None) -> list[str]:
        """The launch at tape position ``index`` (when its kernel agrees), else those of ``kernel`` at ``site``."""
        node = self.tape.get(index) if isinstance(index, int) else None
        if node is not None and (not kernel or node.label == kernel):
            return [node.key]
        if kernel and site:
            return list(self.places.get(f"{kernel} ({_short(site)})", ()))
        return []

    def argument(self, launches: list[str], kernel, adjoint) -> list[str]:
        """The arrays ``kernel.argument.grad`` (or ``kernel.struct.field.grad``) names at these launches."""
        path = str(adjoint or "").removeprefix(f"{kernel}.").removesuffix(".grad")
        for name in (path, path.split(".")[0]):
            found = [a for launch in launches for a in self.passed.get((launch, name), ())]
            if found:
                return found
        return []

    def placed(self, text) -> list[str]:
        """The launches a ``kernel (file.py:LINE), other (file.py:LINE)`` string names."""
        found = []
        for what, site in re.findall(r"\s*([^,]+?) \(([^()]*)\)", str(text or "")):
            for key in self.places.get(f"{what} ({site})", ()):
                if key not in found:
                    found.append(key)
        return found


def _break(marks: Marks, where: _Index, finding, found: ChainBreak) -> None:
    """The array and the launch where the chain to the loss breaks, the path to it bold."""
    cause = str(found.cause or "break")
    tip = finding.message
    for key in where.arrays([found.param, *found.path]):  # the family's first member: its path is the one found
        marks.node(key, penwidth=2)
    launches = where.launch(found.index) or where.placed(found.launch)
    arrays = where.arrays([found.array] if found.array else [])
    for key in arrays + launches:
        marks.node(key, color=BREAK, fontcolor=BREAK, penwidth=3, tooltip=tip)
    labelled = False
    for a in arrays:
        for launch in launches:  # the read backward cannot cross, else (a dead end) the write into the array
            pair = next((p for p in ((a, launch), (launch, a)) if p in where.links), None)
            if pair is not None:
                marks.links[pair] = {"color": BREAK, "fontcolor": BREAK, "penwidth": 3, "label": cause, "tooltip": tip}
                labelled = True
    if not labelled and (launches or arrays):
        marks.nodes[(launches or arrays)[0]]["xlabel"] = cause
    place = found.launch or found.array or finding.subject
    marks.say(f"red: the chain to the loss breaks at {place} ({cause})", finding.subject)


def _origin(marks: Marks, where: _Index, finding, origin: Origin) -> None:
    """The first launch whose adjoint went bad (NaN/Inf, past the norm), and the array it went bad in."""
    launches = where.launch(origin.index, origin.kernel, origin.site)
    arrays = where.argument(launches, origin.kernel, origin.array)  # the adjoint it made bad: its array
    for key in launches + arrays:
        marks.node(key, color=ORIGIN, fontcolor=ORIGIN, penwidth=3, tooltip=finding.message)
    at = origin.kernel or "?"
    if origin.index is not None:
        at += f" (#{origin.index})"
    marks.say(f"orange: where {origin.what} starts in backward, {at}", finding.subject)


def _changed(marks: Marks, where: _Index, finding, changed: ChangedArrays) -> None:
    """The arrays that changed, and their links to the launches backward replays."""
    readers = [key for index in changed.reader_indices for key in where.launch(index)]
    arrays = where.arrays(changed.arrays)
    for key in arrays:
        marks.node(key, color=CHANGED, fontcolor=CHANGED, penwidth=3, tooltip=finding.message)
        for reader in readers:
            if (key, reader) in where.links:
                marks.links[(key, reader)] = {"color": CHANGED, "penwidth": 2, "label": "changed before backward"}
    for reader in readers:
        marks.node(reader, color=CHANGED)
    marks.say("purple: changed after the forward read it and before backward", finding.subject)


def _blamed(marks: Marks, where: _Index, finding, launches: list[BlamedLaunch]) -> None:
    """The launches whose adjoint disagrees with their own finite differences."""
    shown = []
    for launch in launches:
        for key in where.launch(launch.index, launch.kernel, launch.where):
            marks.node(key, color=BLAMED, fontcolor=BLAMED, penwidth=4, style="bold", tooltip=finding.message)
            shown.append(f"{launch.kernel} (#{launch.index})")
    if shown:
        marks.say(f"red, bold: the adjoint of {shown[0]}{_more(len(shown) - 1)} is wrong", finding.subject)


# -- what is drawn ---------------------------------------------------------------------------------------------------
def _select(dataflow: Dataflow, marks: Marks, limit: int = MAX_NODES) -> tuple[set[str], str | None]:
    """What is worth drawing (``_worth``), all of it, or for a large picture what the marks point at (and HOPS
    around it) or the last launches before the loss; with the note that says what was left out."""
    worth = _worth(dataflow, marks)
    if len(worth) <= limit:
        return worth, None
    around: dict[str, list[str]] = {}
    for link in dataflow.links:
        if link.source in worth and link.target in worth:
            around.setdefault(link.source, []).append(link.target)
            around.setdefault(link.target, []).append(link.source)
    marked = [k for k in marks.focus if k != dataflow.loss]
    kept = _neighbourhood(marks.focus, around, limit) if marked else _recent(dataflow, around, worth, limit)
    launches = sum(1 for n in dataflow.nodes if n.is_launch and n.key in worth and n.key not in kept)
    arrays = sum(1 for n in dataflow.nodes if not n.is_launch and n.key in worth and n.key not in kept)
    recent = min(RECENT_LAUNCHES, limit // 2)
    why = "around what is marked" if marked else f"the last {recent} launches at most, up to the loss"
    return kept, f"{launches} launches and {arrays} arrays not drawn\n(drawn: {why})"


def _worth(dataflow: Dataflow, marks: Marks) -> set[str]:
    """Every node but reads to the host no mark names (a ``print(x.numpy())`` moves nothing on the device) and the
    arrays only they touched."""
    shown = {n.key for n in dataflow.nodes if n.kind != "host-read" or n.key in marks.nodes}
    linked = {
        end for link in dataflow.links if {link.source, link.target} <= shown for end in (link.source, link.target)
    }
    always = {n.key for n in dataflow.nodes if n.is_launch or n.loss} | set(marks.nodes)
    return shown & (linked | always)


def _neighbourhood(focus: list[str], around: dict, limit: int = MAX_NODES) -> set[str]:
    """The focus nodes, then what is one hop from them, then two (breadth first), up to MAX_NODES. A hub (a model
    array every step reads) is drawn but not gone through: its readers are the whole rollout, not the neighbourhood."""
    kept = dict.fromkeys(focus)
    frontier = deque((key, 0) for key in focus)
    while frontier and len(kept) < limit:
        key, hops = frontier.popleft()
        if hops == HOPS or (hops and len(around.get(key, ())) > HUB):
            continue
        for other in around.get(key, ()):
            if other not in kept and len(kept) < limit:
                kept[other] = None
                frontier.append((other, hops + 1))
    return set(kept)


def _recent(dataflow: Dataflow, around: dict, worth: set[str], limit: int = MAX_NODES) -> set[str]:
    """Nothing marked: the last launches up to the one that wrote the loss, with their arrays, up to MAX_NODES."""
    launches = sorted((n for n in dataflow.launches if n.key in worth), key=lambda n: n.order)
    writers = [n for n in launches if dataflow.loss in around.get(n.key, ())]
    if writers:
        launches = [n for n in launches if n.order <= writers[-1].order]
    kept = {dataflow.loss} if dataflow.loss else set()
    for count, node in enumerate(reversed(launches)):
        touched = [node.key, *around.get(node.key, ())]
        if count == min(RECENT_LAUNCHES, limit // 2) or len(kept | set(touched)) > limit:
            break
        kept.update(touched)
    return kept


def _style(node: DataflowNode, dataflow: Dataflow) -> dict:
    """How a node looks before any mark: what it is, and how it stands toward backward."""
    styles: list[str] = []
    if node.is_launch:
        attrs = {"shape": "box"}
        where = _short(node.site) if node.site else ""
        if node.index is not None:
            where += f" (#{node.index})"
        lines = [node.label, where.strip()]
        if node.kind == "copy":
            styles.append("rounded")
        if not node.recorded:
            styles.append("dashed")
            lines.append(f"off the tape: {node.why}" if node.why else "off the tape")
        if node.no_backward:
            styles.append("filled")
            attrs.update(fillcolor="gray85", fontcolor="gray25")
            lines.append("enable_backward=False")
        attrs["label"] = "\n".join(line for line in lines if line)
        attrs["tooltip"] = "\n".join(line for line in [node.label, node.site or "", *lines[2:]] if line)
    else:
        attrs = {"shape": "ellipse", "label": node.label, "tooltip": node.label}
        if node.has_grad is False:
            styles.append("dotted")
            attrs["tooltip"] += " (no .grad buffer)"
        if node.loss:
            attrs["peripheries"] = 2
            attrs["tooltip"] += " (the loss)" if node.key == dataflow.loss else " (seeded by backward)"
    if styles:
        attrs["style"] = ",".join(styles)
    return attrs


def _merged(own: dict, marked: dict | None) -> dict:
    """A node's own look with a mark over it: the mark's ``style`` adds to the node's (dashed and bold both hold),
    its tooltip (the finding) comes before the node's."""
    if not marked:
        return own
    out = own | marked
    if "style" in own and "style" in marked:
        out["style"] = ",".join(dict.fromkeys(own["style"].split(",") + marked["style"].split(",")))
    if "tooltip" in own and "tooltip" in marked:
        out["tooltip"] = f"{marked['tooltip']}\n\n{own['tooltip']}"
    return out


# -- dot syntax ------------------------------------------------------------------------------------------------------
def _attrs(**attrs) -> str:
    """``[key="value", …]`` in the order given."""
    return "[" + ", ".join(f"{key}={_quote(value)}" for key, value in attrs.items() if value is not None) + "]"


def _quote(text) -> str:
    """A dot string: backslashes and quotes escaped, a newline as dot's ``\\n`` line break, other control
    characters as spaces (a kernel key or an array name is the program's text, not ours)."""
    text = str(text).replace("\\", "\\\\").replace('"', '\\"')
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = "".join(ch if ch >= " " or ch == "\n" else " " for ch in text).replace("\n", "\\n")
    return f'"{text}"'


def _short(site: str | None) -> str:
    """``/long/path/file.py:34`` → ``file.py:34``: what a person reads beside a kernel name."""
    from gradcheck.model.sites import short_site

    return short_site(site) or ""


def _place(node: DataflowNode) -> str:
    """``kernel (file.py:LINE)``: how the checks' evidence names a launch (gradcheck.tape.flow_graph.Edge.place)."""
    return f"{node.label} ({_short(node.site)})" if node.site else node.label


def _write(path: Path, data: bytes) -> None:
    """Write through a temporary file beside ``path`` and rename it over it (a reader never sees half a picture);
    a device or FIFO is written directly. Raises OSError."""
    import stat
    import tempfile

    path = path.expanduser()
    try:
        regular = stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        regular = True
    if not regular:
        with open(path, "wb") as handle:
            handle.write(data)
        return
    handle = tempfile.NamedTemporaryFile(dir=path.resolve().parent, prefix=f".{path.name}.", delete=False)
    try:
        with handle:
            handle.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(handle.name, 0o666 & ~umask)
        os.replace(handle.name, path.resolve())
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(handle.name)
        raise
