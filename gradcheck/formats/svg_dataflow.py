"""The dataflow picture of ``--graph`` as inline SVG, for the report page: laid out here, without Graphviz.

The page must open anywhere with nothing installed, so it cannot wait on ``dot``. It draws the same ``Drawing``
(formats.dot_graph: the nodes kept, their look, the marks the findings put on them), top to bottom as a page is
read: a layered layout (each node a layer below everything it depends on, a layer wider than the page wrapped into
rows, each ordered by a few sweeps of the barycentre heuristic to cut crossings), launches as boxes and arrays as
ellipses, a link as a curve (one that goes back up, an in-place write, runs along the right edge, clear of the
captions). The links of a hub (a model array every launch reads) are drawn faint unless marked: a fan of them would
hide everything under it. Hover text is SVG's ``<title>``, so the page needs no JavaScript. ``--graph FILE.svg``
draws the Graphviz version.
"""

from __future__ import annotations

from html import escape

from gradcheck.formats.dot_graph import Drawing

CHAR = 6.6  # px per character at the 11 px font (a bound that holds for the usual sans-serif fonts)
GAP_X, GAP_Y, MARGIN = 18, 34, 12
ROW_WIDTH = 1040  # a layer wider than this is wrapped into rows (the page is ~1100 px wide)
HUB = 8  # a node with more links than this draws its unmarked links faint
SWEEPS = 4
PALETTE = {"gray85": "#d9d9d9", "gray25": "#404040", "gray40": "#666666", "gray50": "#7f7f7f"}


def svg(drawn: Drawing, ident: str = "dataflow") -> str:
    """The picture as one ``<svg>`` element (its size in its viewBox); ``ident`` makes its arrowheads' ids unique
    on a page of several pictures."""
    keys = [node.key for node, _ in drawn.nodes]
    looks = {node.key: (node, attrs) for node, attrs in drawn.nodes}
    pairs = [(link.source, link.target) for link, _ in drawn.links]
    layers = _columns(keys, pairs)
    sizes = {key: _size(attrs, looks[key][0].is_launch) for key, (_, attrs) in looks.items()}
    header = [drawn.title, *drawn.legend] + ([drawn.hidden.replace("\n", " ")] if drawn.hidden else [])
    top = MARGIN + 16 * len(header) + 8
    places, width, height = _place(layers, sizes, top)
    degree: dict[str, int] = {}
    for a, b in pairs:
        degree[a], degree[b] = degree.get(a, 0) + 1, degree.get(b, 0) + 1
    colours = sorted({_color(attrs.get("color")) or "#666666" for _, attrs in drawn.links} | {"#666666"})
    markers = {c: f"{ident}-arrow-{k}" for k, c in enumerate(colours)}
    parts = [
        f'<text x="{MARGIN}" y="{MARGIN + 12 + 16 * i}" class="{"title" if i == 0 else "legend"}">{escape(line)}</text>'
        for i, line in enumerate(header)
    ]
    for link, attrs in drawn.links:
        faint = not attrs and max(degree[link.source], degree[link.target]) > HUB
        parts.append(_link(places, sizes, link, attrs, width, markers, faint))
    for key in keys:
        node, attrs = looks[key]
        parts.append(_node(node, attrs, places[key], sizes[key]))
    width = max(width, max((len(line) for line in header), default=0) * CHAR + 2 * MARGIN) + 60  # the side lane
    defs = "".join(
        f'<marker id="{name}" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="8" markerHeight="8" '
        f'markerUnits="userSpaceOnUse" orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="{colour}"/></marker>'
        for colour, name in markers.items()
    )
    return (
        f'<svg class="dataflow" viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" height="{height:.0f}" '
        f'role="img" aria-label="{escape(drawn.title)}"><defs>{defs}</defs>' + "".join(parts) + "</svg>"
    )


def _columns(keys: list[str], links: list[tuple[str, str]]) -> list[list[str]]:
    """The layers, top first: each node one layer below all it depends on (links that close a cycle, an in-place
    kernel reading and writing one array, are left out of the ordering), each layer ordered by the barycentre of its
    neighbours."""
    order = {key: i for i, key in enumerate(keys)}  # time order: what the tape did first comes first
    ahead = [(a, b) for a, b in links if a in order and b in order and a != b]
    forward = _acyclic(keys, ahead)
    column = dict.fromkeys(keys, 0)
    for key in _topological(keys, forward):
        for other in forward.get(key, ()):
            column[other] = max(column[other], column[key] + 1)
    columns: list[list[str]] = [[] for _ in range(max(column.values(), default=0) + 1)]
    for key in keys:
        columns[column[key]].append(key)
    neighbours: dict[str, list[str]] = {}
    for a, b in ahead:
        neighbours.setdefault(a, []).append(b)
        neighbours.setdefault(b, []).append(a)
    for sweep in range(SWEEPS):
        sequence = columns[1:] if sweep % 2 == 0 else list(reversed(columns[:-1]))
        for nodes in sequence:
            rows = {key: i for col in columns for i, key in enumerate(col)}
            nodes.sort(key=lambda k: _barycentre(k, neighbours, rows, column))
    return columns


def _acyclic(keys: list[str], links: list[tuple[str, str]]) -> dict[str, list[str]]:
    """The links as successor lists, without those that close a cycle (depth first, in time order)."""
    succ: dict[str, list[str]] = {}
    for a, b in links:
        succ.setdefault(a, []).append(b)
    state: dict[str, int] = {}
    kept: dict[str, list[str]] = {}
    for root in keys:
        if root in state:
            continue
        stack = [(root, iter(succ.get(root, ())))]
        state[root] = 1
        while stack:
            key, successors = stack[-1]
            nxt = next(successors, None)
            if nxt is None:
                state[key] = 2
                stack.pop()
            elif state.get(nxt) != 1:  # not an edge back to a node on the current path
                kept.setdefault(key, []).append(nxt)
                if nxt not in state:
                    state[nxt] = 1
                    stack.append((nxt, iter(succ.get(nxt, ()))))
    return kept


def _topological(keys: list[str], succ: dict[str, list[str]]) -> list[str]:
    incoming = dict.fromkeys(keys, 0)
    for targets in succ.values():
        for target in targets:
            incoming[target] += 1
    ready = [k for k in keys if incoming[k] == 0]
    out = []
    while ready:
        key = ready.pop(0)
        out.append(key)
        for target in succ.get(key, ()):
            incoming[target] -= 1
            if incoming[target] == 0:
                ready.append(target)
    return out


def _barycentre(key: str, neighbours: dict, rows: dict, column: dict) -> float:
    near = [rows[n] for n in neighbours.get(key, ()) if column[n] != column[key]]
    return sum(near) / len(near) if near else rows[key]


def _size(attrs: dict, launch: bool) -> tuple[float, float]:
    lines = str(attrs.get("label", "")).split("\n")
    width = max(len(line) for line in lines) * CHAR + (16 if launch else 28)
    return max(width, 40.0), 14.0 * len(lines) + (10 if launch else 12)


def _place(layers: list[list[str]], sizes: dict, top: float) -> tuple[dict, float, float]:
    """Each node's centre, layer by layer down the page, a layer wider than ROW_WIDTH wrapped into rows, each row
    centred; the picture's width and height."""
    rows: list[list[str]] = []
    for nodes in layers:
        row: list[str] = []
        for key in nodes:
            if row and sum(sizes[k][0] + GAP_X for k in row) + sizes[key][0] > ROW_WIDTH:
                rows.append(row)
                row = []
            row.append(key)
        if row:
            rows.append(row)
    width = max((sum(sizes[k][0] + GAP_X for k in row) - GAP_X for row in rows), default=0.0) + 2 * MARGIN
    places, y = {}, top
    for row in rows:
        tall = max(sizes[k][1] for k in row)
        x = (width - (sum(sizes[k][0] + GAP_X for k in row) - GAP_X)) / 2
        for key in row:
            places[key] = (x + sizes[key][0] / 2, y + tall / 2)
            x += sizes[key][0] + GAP_X
        y += tall + GAP_Y
    return places, width, y - GAP_Y + MARGIN


def _color(name) -> str:
    return PALETTE.get(str(name), str(name)) if name else ""


def _node(node, attrs: dict, centre, size) -> str:
    x, y = centre
    w, h = size
    style = str(attrs.get("style", "")).split(",")
    stroke = _color(attrs.get("color")) or "#333333"
    width = float(attrs.get("penwidth") or 1)
    dash = ' stroke-dasharray="5,3"' if "dashed" in style else ' stroke-dasharray="2,2"' if "dotted" in style else ""
    fill = _color(attrs.get("fillcolor")) if "filled" in style else "#ffffff"
    common = f'fill="{fill}" stroke="{stroke}" stroke-width="{width:g}"{dash}'
    if node.is_launch:
        rounded = ' rx="6"' if "rounded" in style else ""
        shape = f'<rect x="{x - w / 2:.0f}" y="{y - h / 2:.0f}" width="{w:.0f}" height="{h:.0f}"{rounded} {common}/>'
    else:
        shape = f'<ellipse cx="{x:.0f}" cy="{y:.0f}" rx="{w / 2:.0f}" ry="{h / 2:.0f}" {common}/>'
        if attrs.get("peripheries") == 2:
            shape += (
                f'<ellipse cx="{x:.0f}" cy="{y:.0f}" rx="{w / 2 + 3:.0f}" ry="{h / 2 + 3:.0f}" fill="none" '
                f'stroke="{stroke}" stroke-width="{width:g}"/>'
            )
    lines = str(attrs.get("label", "")).split("\n")
    colour = _color(attrs.get("fontcolor")) or "#111111"
    first = y - 7 * (len(lines) - 1) + 4
    bold = ' font-weight="bold"' if node.is_launch else ""
    text = "".join(
        f'<text x="{x:.0f}" y="{first + 14 * i:.0f}" text-anchor="middle" fill="{colour}"{bold if i == 0 else ""}>'
        f"{escape(line)}</text>"
        for i, line in enumerate(lines)
    )
    if attrs.get("xlabel"):
        said = escape(str(attrs["xlabel"]))
        text += f'<text x="{x:.0f}" y="{y - h / 2 - 4:.0f}" text-anchor="middle" fill="{stroke}">{said}</text>'
    tip = f"<title>{escape(str(attrs.get('tooltip') or node.label))}</title>"
    kind = "launch" if node.is_launch else "array"
    return f'<g class="node {kind}" data-key="{escape(node.key)}">{tip}{shape}{text}</g>'


def _link(places: dict, sizes: dict, link, attrs: dict, width: float, markers: dict, faint: bool) -> str:
    """A curve from the bottom of the source to the top of the target when the target is lower; else (a link back
    up, or within one row) along the right edge of the picture, clear of the nodes and the captions."""
    (ax, ay), (bx, by) = places[link.source], places[link.target]
    ha, hb = sizes[link.source][1] / 2, sizes[link.target][1] / 2
    if by - hb > ay + ha:
        start, end = (ax, ay + ha), (bx, by - hb)
        bend = max((end[1] - start[1]) / 2, 12)
        c1, c2 = (start[0], start[1] + bend), (end[0], end[1] - bend)
    else:
        start, end = (ax + sizes[link.source][0] / 2, ay), (bx + sizes[link.target][0] / 2, by)
        lane = width + 30
        c1, c2 = (lane, start[1]), (lane, end[1])
    stroke = _color(attrs.get("color")) or "#666666"
    pen = float(attrs.get("penwidth") or 1)
    opacity = ' stroke-opacity="0.2"' if faint else ""
    path = (
        f'<path d="M{start[0]:.0f},{start[1]:.0f} C{c1[0]:.0f},{c1[1]:.0f} {c2[0]:.0f},{c2[1]:.0f} {end[0]:.0f},'
        f'{end[1]:.0f}" fill="none" stroke="{stroke}" stroke-width="{pen:g}"{opacity} '
        f'marker-end="url(#{markers.get(stroke, next(iter(markers.values())))})"/>'
    )
    if not attrs:  # an unmarked link: no caption, no hover text (most of a picture's links; they cost bytes)
        return path
    label = ""
    if attrs.get("label"):
        mx, my = (start[0] + end[0]) / 2 + 6, (start[1] + end[1]) / 2
        label = f'<text x="{mx:.0f}" y="{my:.0f}" fill="{stroke}">{escape(str(attrs["label"]))}</text>'
    how = link.kind + (f" as {link.argument}" if link.argument else "")
    tip = f"<title>{escape(str(attrs.get('tooltip') or how))}</title>"
    return f'<g class="link {escape(link.kind)}">{tip}{path}{label}</g>'
