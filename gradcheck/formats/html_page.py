"""``--html DIR``: the report as one self-contained page, a place to look at a long run (coverage.py's ``htmlcov``).

What the page holds, in order: the verdict (and the exit code it makes), then per scenario its findings grouped as
the table groups them (finding_groups) with the source lines around each site (code_places), the loss and each
parameter's gradient norm over the run (svg_curves: the backwards the report kept, and it says which), the dataflow
picture of ``--graph`` when a backward's was kept (svg_dataflow), the parameters' table, the per-launch adjoint
test, what ``--select``/``--ignore`` suppressed, and the notes.

Self-contained: CSS and SVG inline, no script, no font, no image, no address outside the page, so it opens from a
CI artifact with no network, and every part reads without JavaScript (hover text is SVG's ``<title>``, long lists
fold into ``<details>``). Small whatever the run's length: everything it draws is bounded (the report's bounded
histories, ``MAX_GROUPS`` finding groups with ``MAX_LISTED`` findings each, ``MAX_CURVES`` plotted parameters,
``MAX_ROWS`` table rows, a picture of at most ``PICTURE_NODES`` nodes), each cut said on the page.
"""

from __future__ import annotations

import math
from html import escape

from gradcheck.formats import svg_curves
from gradcheck.formats.code_places import Locator, source_root
from gradcheck.formats.finding_groups import FindingGroup, group_findings
from gradcheck.model.paths import family, group_by_family
from gradcheck.model.sites import short_site

MAX_GROUPS = 100  # finding groups a scenario shows
MAX_LISTED = 100  # findings a group lists in full
MAX_CURVES = 24  # parameters plotted (flagged first, then the largest norms)
PER_CHART = 6
MAX_ROWS = 200  # parameter and kernel rows
CONTEXT = 3  # source lines before and after a site
PICTURE_NODES = 120  # the dataflow picture's nodes at most (Graphviz's --graph draws up to 300)
VERDICTS = {0: ("pass", "PASS"), 1: ("fail", "FAIL")}
STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:0 auto;max-width:1100px;
padding:0 20px 40px;color:#1b1b1b;background:#fff}
h1{font-size:22px;margin:18px 0 4px}h2{font-size:18px;margin:26px 0 6px;border-bottom:1px solid #ddd}
h3{font-size:15px;margin:18px 0 6px}code,pre,.mono{font:12.5px/1.4 ui-monospace,Menlo,Consolas,monospace}
.env{color:#555;margin:0}.verdict{border-radius:6px;padding:10px 16px;margin:14px 0;border:2px solid}
.verdict.pass{background:#eefbef;border-color:#2e8b3d}.verdict.fail{background:#fdeeee;border-color:#c62828}
.verdict.error{background:#fff6e5;border-color:#d98400}.verdict h2{border:0;margin:0;font-size:20px}
.sev{display:inline-block;min-width:58px;text-align:center;border-radius:4px;padding:0 6px;font-weight:600;color:#fff}
.sev.error{background:#c62828}.sev.warning{background:#b8860b}.sev.info{background:#1f6fb2}
.finding{border:1px solid #ddd;border-left:5px solid #999;border-radius:4px;padding:8px 12px;margin:10px 0}
.finding.error{border-left-color:#c62828}.finding.warning{border-left-color:#b8860b}
.finding.info{border-left-color:#1f6fb2}.finding p{margin:4px 0}.fix{color:#333;background:#f6f8fa;padding:4px 8px}
.source{margin:6px 0;border:1px solid #e1e4e8;border-radius:4px;overflow:auto}
.source figcaption{background:#f6f8fa;padding:2px 8px;font-size:12px;color:#444}
.source pre{margin:0;padding:4px 0}.source .line{display:block;padding:0 8px;white-space:pre}
.source .site{background:#fff1b8}.ln{display:inline-block;width:44px;color:#888;text-align:right;margin-right:10px}
table{border-collapse:collapse;margin:6px 0}td,th{padding:2px 10px;border-bottom:1px solid #eee;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums}.bad{color:#c62828;font-weight:600}
.charts{display:flex;flex-wrap:wrap;gap:14px}.chart-box{flex:0 0 auto}
svg.chart{max-width:100%;height:auto}svg.chart text{font-size:10px;fill:#444}
svg.chart .plot{fill:#fcfcfc;stroke:#ccc}svg.chart .grid{stroke:#e6e6e6}
.legend{list-style:none;padding:0;margin:2px 0 0 60px;font-size:12px}.legend li{margin:1px 0}
.swatch{display:inline-block;width:12px;height:3px;vertical-align:middle;margin-right:6px}
.picture{overflow:auto;border:1px solid #e1e4e8;border-radius:4px;max-height:720px}
svg.dataflow text{font:11px Helvetica,Arial,sans-serif}svg.dataflow .title{font-weight:600;font-size:12px}
.muted{color:#666}details{margin:4px 0}summary{cursor:pointer;color:#0b5cad}.wide{overflow-x:auto}
"""


def page(document, pictures=None) -> str:
    """The page of a Report (run, blame, exec, combine) or a CiDoc (ci). ``pictures``: scenario name → the
    ``dot_graph.Drawing`` of one of its backwards (``--graph``'s picture), when the driver kept one."""
    report = document.report if document.KIND == "ci" else document
    pictures = pictures or {}
    locator = Locator(source_root(getattr(report, "source_root", None)))
    kind, word = _verdict_word(report)
    names = ", ".join(s.name for s in report.scenarios) or "no scenario"
    body = [
        '<header id="top"><h1>gradcheck report</h1>', f'<p class="env">{escape(_environment(report))}</p></header>',
        _verdict(report, kind, word),
    ]  # fmt: skip
    for k, result in enumerate(report.scenarios):
        body.append(_scenario(result, f"s{k}", locator, pictures.get(result.name)))
    body.append(_report_notes(report))
    text = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>gradcheck: {word} — {escape(names)}</title><style>{STYLE}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )
    return text.encode("utf-8", "replace").decode("utf-8")  # a file name that is not UTF-8 (surrogates): "?"


def _environment(report) -> str:
    env = report.environment
    said = [f"{k} {env[k]}" for k in ("gradcheck", "warp", "newton", "torch", "python") if env.get(k)]
    return f"device {env.get('device') or '?'} — " + ", ".join(said)


def _verdict_word(report) -> tuple[str, str]:
    code = int(report.exit_code)
    return VERDICTS.get(code, ("error", "ERROR"))


def _verdict(report, kind: str, word: str) -> str:
    counts = {"error": 0, "warning": 0, "info": 0}
    for result in report.scenarios:
        for finding in result.findings:
            counts[finding.severity.label] += 1
    failed = sum(1 for r in report.scenarios if r.error is not None)
    said = [f"{n} {label}{'s' if n != 1 else ''}" for label, n in counts.items()]
    said += [f"{failed} failed to run"] if failed else []
    said += [f"{len(report.ignored)} suppressed"] if report.ignored else []
    lines = [f'<section id="verdict" class="verdict {kind}"><h2>{word}: exit code {int(report.exit_code)}</h2>']
    lines.append(f"<p>{len(report.scenarios)} scenario(s): {', '.join(said)} (fail on {report.fail_on.label})</p>")
    if report.error:
        lines.append(f'<p class="bad">error: {escape(report.error)}</p>')
    items = [
        f'<li><a href="#s{k}">{escape(_title(r))}</a>: {escape(_status(r))}</li>'
        for k, r in enumerate(report.scenarios)
    ]
    return "\n".join(lines + (["<ul>", *items, "</ul>"] if items else []) + ["</section>"])


def _title(result) -> str:
    """The table's title: ``ci``'s entry label (which names the fault already), else the name and the fault."""
    return result.label or result.name + (f" --fault {result.fault}" if result.fault else "")


def _status(result) -> str:
    if result.error is not None:
        return "failed to run"
    found = [f.severity.label for f in result.findings]
    return ", ".join(f"{found.count(s)} {s}(s)" for s in ("error", "warning", "info") if s in found) or "no findings"


def _scenario(result, ident: str, locator: Locator, drawn) -> str:
    plural = "passes" if result.unit == "pass" else f"{result.unit}s"
    options = " ".join(f"{k}={v}" for k, v in result.options.items())
    head = [
        f'<section class="scenario" id="{ident}"><h2>{escape(_title(result))}</h2>',
        f'<p class="muted">{escape(result.spec)}{" — " + escape(options) if options else ""} — {result.passes} '
        f"{escape(result.unit if result.passes == 1 else plural)} on {escape(result.device or 'no device')} in "
        f"{result.seconds:.2f} s{_loss_line(result)}</p>",
    ]
    if result.error:
        head.append(f'<p class="bad">error: {escape(result.error)}</p>')
    families = _families(result.params)  # the curves' and the table's rows, flagged first
    parts = [
        _findings(result, ident, locator),
        _curves(result, ident, families),
        _dataflow(drawn, ident),
        _params(result, ident, families),
        _blame(result, ident),
        _suppressed(result, ident),
        _notes(result, ident),
    ]
    return "\n".join(head + [p for p in parts if p] + ["</section>"])


def _loss_line(result) -> str:
    """``; loss 2.84 (backward 1) → 0.0012 (backward 20000)``: the first and last loss of the curve."""
    points = [(b, v) for b, v in result.loss_curve if v is not None] or [
        (b, v) for b, v in enumerate(result.losses, 1) if v is not None
    ]
    if not points:
        return ""
    (b0, first), (b1, last) = points[0], points[-1]
    unit = escape(result.unit)
    return f"; loss {_fmt(first)} ({unit} {b0}) → {_fmt(last)} ({unit} {b1})"


def _findings(result, ident: str, locator: Locator) -> str:
    groups = group_findings(result.findings)
    out = [f'<section class="findings" id="{ident}-findings"><h3>Findings</h3>']
    if not groups:
        out.append('<p class="muted">no findings</p>')
    for k, group in enumerate(groups[:MAX_GROUPS]):
        out.append(_group(group, f"{ident}-f{k}", result.spec, locator))
    if len(groups) > MAX_GROUPS:
        out.append(f'<p class="muted">{len(groups) - MAX_GROUPS} more groups: run with --format json for all</p>')
    return "\n".join(out + ["</section>"])


def _group(group: FindingGroup, ident: str, spec: str, locator: Locator) -> str:
    worst = group.worst
    label = group.severity.label
    count = len(group.members)
    head = f"{count} findings{', worst first' if group.members[0].measure else ''}" if count > 1 else ""
    lines = [
        f'<article class="finding {label}" id="{ident}"><p><span class="sev {label}">{label}</span> '
        f'<code class="check">{escape(group.check)}</code> <span class="muted">{head}</span></p>',
    ]
    if count > 1:
        shown, more = group.shown()
        names = ", ".join(escape(m.compact()) for m in shown) + (f", +{more} more" if more else "")
        lines.append(f'<p class="subjects">{names}</p>')
    lines.append(f'<p class="message"><b>{escape(worst.subject)}</b>: {escape(worst.message)}</p>')
    lines.append(f'<p class="fix">fix: {escape(group.fix)} <span class="muted">(gradcheck explain '
                 f"{escape(group.check)})</span></p>")  # fmt: skip
    lines.append(_source(locator, worst, spec))
    if count > 1:
        items = [f"<li><b>{escape(f.subject)}</b>: {escape(f.message)}</li>" for f in group.findings[:MAX_LISTED]]
        if count > MAX_LISTED:
            items.append(f"<li>{count - MAX_LISTED} more: run with --format json for all</li>")
        lines.append(f"<details><summary>all {count}</summary><ul>{''.join(items)}</ul></details>")
    return "\n".join(lines + ["</article>"])


def _source(locator: Locator, finding, spec: str) -> str:
    """The lines around the finding's site, the site marked; nothing when its file is not in the source root."""
    place = locator.place(finding, spec)
    lines = locator.around(place, CONTEXT)
    if not lines:
        return ""
    code = "".join(
        f'<span class="line{" site" if n == place.line else ""}"><span class="ln">{n}</span>{escape(text)}</span>'
        for n, text in lines
    )
    return f'<figure class="source"><figcaption>{escape(place.uri)}:{place.line}</figcaption><pre>{code}</pre></figure>'


def _curves(result, ident: str, families: list) -> str:
    loss = result.loss_curve or tuple(enumerate(result.losses, 1))
    plotted = [f for f in families if f.norms][:MAX_CURVES]  # flagged first, then the largest
    out = [f'<section class="curves" id="{ident}-curves"><h3>Loss and gradient norms</h3>', _sampled(result, plotted)]
    charts = []
    if any(v is not None for _, v in loss):
        series = svg_curves.Series("loss", tuple(b for b, _ in loss), tuple(_num(v) for _, v in loss))
        charts.append(_chart_box([series], "the loss", "loss", result.unit))
    elif plotted:
        out.append('<p class="muted">no loss to plot: backward was seeded (tape.backward(grads=…)) or the loss was '
                   "not an array gradcheck saw</p>")  # fmt: skip
    for start in range(0, len(plotted), PER_CHART):
        chunk = plotted[start : start + PER_CHART]
        series = [_norm_series(p) for p in chunk]
        charts.append(_chart_box(series, "gradient norms", "gradient norm", result.unit))
    if not charts:
        out.append('<p class="muted">nothing was measured to plot</p>')
    out.append('<div class="charts">' + "".join(charts) + "</div>")
    left = len(families) - len(plotted)
    if left > 0:
        out.append(f'<p class="muted">{left} more parameter families not plotted (flagged ones and the largest '
                   "norms are): their numbers are in the table below</p>")  # fmt: skip
    return "\n".join(out + ["</section>"])


def _sampled(result, plotted: list) -> str:
    """Which passes or backwards the curves show: all of them, or the bounded sample a long program's report keeps."""
    unit, ran = result.unit, result.passes
    said = f"{ran} {escape(unit if ran == 1 else ('passes' if unit == 'pass' else unit + 's'))}"
    shown = {b for b, _ in result.loss_curve} | {b for f in plotted for b in f.backwards}
    if not ran or not shown:
        return f'<p class="muted">{said}: nothing was measured</p>'
    sampling = result.sampling
    audited = f", {escape(str(sampling.get('audited', '?')))} of them audited in full" if sampling else ""
    if len(shown) >= ran and not sampling:
        return f'<p class="muted">{said}{audited}; the curves plot every one</p>'
    return (
        f'<p class="muted">{said}{audited}; the curves plot the {len(shown)} the report kept, from {min(shown)} to '
        f"{max(shown)} (a long run's history keeps a sample that thins out as it fills): a spike between two of them "
        "is not drawn</p>"
    )


def _num(value) -> float | None:
    return None if value is None else float(value)


class _Family:
    """A family of parameters (``controls[*].joint_f.grad`` ×100) as one row and one curve: its norm is the L2
    norm over every member, at each backward all of them were read (as the table's sparkline)."""

    def __init__(self, members: list) -> None:
        first = members[0]
        self.count = len(members)
        self.label = f"{family(first.subject)} ×{self.count}" if self.count > 1 else first.subject
        self.shape = first.shape
        self.backwards, self.norms = _family_curve(members)
        verdicts = [v for m in members for v in m.verdict.split(", ") if v and v != "ok"]
        self.verdict = ", ".join(dict.fromkeys(verdicts)) or first.verdict

    @property
    def peak(self) -> float:
        return max((n for n in self.norms if math.isfinite(n)), default=0.0)

    @property
    def flagged(self) -> bool:
        return self.verdict != "ok"


def _family_curve(members: list) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """(backwards, norms) of a family: at each backward every member was read at, the L2 norm over them (NaN when
    one is not finite). Members read at different backwards are matched by backward, never by position; without
    the backwards (an old report), by position."""
    from gradcheck.formats.table import family_norms

    if not all(len(m.backwards) == len(m.norms) for m in members):
        norms = tuple(family_norms(members)) if len(members) > 1 else tuple(members[0].norms)
        return tuple(range(1, len(norms) + 1)), norms
    readings = [dict(zip(m.backwards, m.norms)) for m in members]
    shared = sorted(set(readings[0]).intersection(*readings[1:]))
    norms = []
    for backward in shared:
        values = [r[backward] for r in readings]
        finite = all(math.isfinite(v) for v in values)
        norms.append(math.sqrt(sum(v * v for v in values)) if finite else math.nan)
    return tuple(shared), tuple(norms)


def _families(params) -> list[_Family]:
    """Flagged families first, then the largest peak norm."""
    found = [_Family(members) for members in group_by_family(params, key=lambda p: p.subject).values()]
    return sorted(found, key=lambda f: (not f.flagged, -f.peak))


def _norm_series(fam: _Family) -> svg_curves.Series:
    return svg_curves.Series(fam.label, fam.backwards, fam.norms)


def _chart_box(series: list, label: str, y_name: str, unit: str) -> str:
    svg = svg_curves.chart(series, label=label, y_name=y_name, x_name=unit)
    legend = "".join(
        f'<li><span class="swatch" style="background:{svg_curves.colour(k)}"></span>{escape(s.label)}</li>'
        for k, s in enumerate(series)
    )
    return f'<div class="chart-box">{svg}<ul class="legend">{legend}</ul></div>'


def _dataflow(drawn, ident: str) -> str:
    from gradcheck.formats.svg_dataflow import svg

    out = [f'<section class="dataflow" id="{ident}-dataflow"><h3>Dataflow</h3>']
    if drawn is None:
        out.append('<p class="muted">no picture: no audited backward\'s dataflow was kept (the program stopped '
                   "before one, or --timeout ran the scenario in a worker process, or ci did)</p>")  # fmt: skip
    else:
        out.append(f'<p class="muted">backward {drawn.backward}: launches are boxes, arrays ellipses; what the '
                   "findings mark is coloured (hover for the finding)</p>")  # fmt: skip
        out.append(f'<div class="picture">{svg(drawn, ident)}</div>')
    return "\n".join(out + ["</section>"])


def _params(result, ident: str, families: list) -> str:
    if not result.params:
        return (f'<section class="params" id="{ident}-params"><h3>Parameters</h3><p class="muted">no parameter '
                "gradient was measured (no audited backward reached one)</p></section>")  # fmt: skip
    rows = []
    for fam in families[:MAX_ROWS]:
        first, last = (fam.norms[0], fam.norms[-1]) if fam.norms else (math.nan, math.nan)
        ratio = last / first if first and math.isfinite(first) else math.nan
        bad = ' class="bad"' if fam.flagged else ""
        rows.append(f"<tr><td><code>{escape(fam.label)}</code></td><td>{escape('×'.join(map(str, fam.shape)))}</td>"
                    f'<td class="num">{_fmt(first)}</td><td class="num">{_fmt(last)}</td>'
                    f'<td class="num">{_fmt(ratio)}</td><td{bad}>{escape(fam.verdict)}</td></tr>')  # fmt: skip
    more = len(families) - MAX_ROWS
    tail = f'<p class="muted">{more} more rows: run with --format json for all</p>' if more > 0 else ""
    return (
        f'<section class="params" id="{ident}-params"><h3>Parameters</h3><div class="wide"><table><thead><tr><th>gradient</th>'
        "<th>shape</th><th>first</th><th>last</th><th>last/first</th><th>verdict</th></tr></thead><tbody>"
        + "".join(rows) + f"</tbody></table></div>{tail}</section>"
    )  # fmt: skip


def _blame(result, ident: str) -> str:
    blame = result.blame
    if blame is None:
        return ""
    head = f'<section class="blame" id="{ident}-blame"><h3>Per-launch adjoint test</h3><p class="muted">'
    head += escape(blame.skipped or blame.why) + (f"; {escape(blame.note)}" if blame.note else "") + "</p>"
    rows = []
    for k in blame.kernels[:MAX_ROWS]:
        judged = sum(n for status, n in k.statuses.items() if status not in ("no-verdict", "not-checked"))
        where = escape(k.where or "")
        rows.append(
            f'<tr><td><code>{escape(k.kernel)}</code></td><td title="{where}">{escape(short_site(k.where) or "" if k.where else "")}</td>'
            f'<td class="num">{k.launches}</td><td>{escape(", ".join(f"{n} {s}" for s, n in k.statuses.items()))}'
            f'</td><td class="num">{_fmt(k.worst_rel_error) if judged else "–"}</td></tr>'
        )
    if not rows:
        return head + '<p class="muted">no launch was tested</p></section>'
    return (
        head + '<div class="wide"><table><thead><tr><th>kernel</th><th>first launch</th><th>launches</th>'
        "<th>verdicts</th><th>worst rel. error</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>"
        "</section>"
    )  # fmt: skip


def _suppressed(result, ident: str) -> str:
    out = [f'<section class="suppressed" id="{ident}-suppressed"><h3>Suppressed</h3>']
    if not result.ignored:
        out.append('<p class="muted">nothing was suppressed (--select, --ignore, [tool.gradcheck])</p>')
    else:
        items = [
            f'<li><span class="sev {f.severity.label}">{f.severity.label}</span> <code>{escape(f.check)}</code> '
            f'<b>{escape(f.subject)}</b>: {escape(f.message)} <span class="muted">(suppressed by '
            f"{escape(str(f.ignored_by))})</span></li>"
            for f in result.ignored[:MAX_LISTED]
        ]
        more = len(result.ignored) - MAX_LISTED
        items += [f"<li>{more} more: run with --format json for all</li>"] if more > 0 else []
        out.append("<ul>" + "".join(items) + "</ul>")
    return "\n".join(out + ["</section>"])


def _notes(result, ident: str) -> str:
    notes = list(result.notes)
    if result.fd is not None:
        fd = result.fd
        notes.append(f"finite differences ({fd.mode}): " + (fd.skipped or f"worst direction error "
                     f"{_fmt(fd.max_direction_error)} over {fd.rollouts} rollouts"))  # fmt: skip
    if result.clip is not None and result.clip.total_before:
        notes.append(f"--clip-norm {result.clip.max_norm:g}: global norm {_fmt(result.clip.total_before[-1])} → "
                     f"{_fmt(result.clip.total_after[-1])} on the last pass")  # fmt: skip
    items = "".join(f"<li>{escape(n)}</li>" for n in notes) or '<li class="muted">none</li>'
    return f'<section class="notes" id="{ident}-notes"><h3>Notes</h3><ul>{items}</ul></section>'


def _report_notes(report) -> str:
    not_judged = getattr(report, "not_judged", {}) or {}
    if not not_judged:
        return ""
    items = "".join(f"<li><code>{escape(c)}</code>: {escape(why)}</li>" for c, why in not_judged.items())
    return f'<section id="not-judged"><h2>Checks this run gave no evidence to</h2><ul>{items}</ul></section>'


def _fmt(x) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, float) and math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.4g}"
