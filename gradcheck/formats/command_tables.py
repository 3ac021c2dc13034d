"""The table format of the commands that are not a gradient report: explain, selftest, doctor, list, sweep, ci.

Each renderer takes its document (gradcheck.model.documents) and returns the text; a document that carries a
usage error renders as that one line, as the report does.
"""

from __future__ import annotations

import io

from gradcheck.formats.table import text_console


def _escape(text) -> str:
    """Text from scenarios and programs is never Rich markup: "[tool.gradcheck]" or "[/data]" stay as written."""
    from rich.markup import escape

    return escape(str(text))


def _table(**kwargs):
    from rich.table import Table

    return Table(box=None, header_style="bold", pad_edge=False, **kwargs)


def _printed(renderables, color: bool, width: int) -> str:
    buffer = io.StringIO()
    console = text_console(buffer, color, width)
    for item in renderables:
        console.print(item, markup=False) if isinstance(item, str) else console.print(item)
    return buffer.getvalue()


def explain(doc, *, color: bool = False, width: int = 100, verbose: bool = False) -> str:
    if doc.error is not None:
        return ""  # a usage error: the one stderr line says it
    if len(doc.checks) == 1 and doc.checks[0].explain is not None:
        check = doc.checks[0]
        return f"{check.name}: {check.summary}\n\n{check.explain.strip()}\n"
    size = max((len(c.name) for c in doc.checks), default=0)
    lines = [f"{c.name.ljust(size)}  {c.summary}" for c in doc.checks]
    return "\n".join(lines) + "\n\ngradcheck explain CHECK for what it means, causes, fix and an example\n"


def selftest(doc, *, color: bool = False, width: int = 100, verbose: bool = False) -> str:
    if doc.error is not None:
        return ""  # a usage error: the one stderr line says it
    table = _table(title="gradcheck selftest")
    for column in ("variant", "must fire", "fired", "result"):
        table.add_column(column, overflow="fold")
    for row in doc.rows:
        fired = row.detail if row.result in ("skipped", "error") else ", ".join(row.fired) or "nothing"
        table.add_row(*(_escape(cell) for cell in (row.variant, ", ".join(row.expect) or "nothing", fired, row.result)))
    counts = doc.counts()
    summary = f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped"
    return _printed([table], color, width) + summary + "\n"


def doctor(doc, *, color: bool = False, width: int = 100, verbose: bool = False) -> str:
    if doc.error is not None:
        return ""  # a usage error: the one stderr line says it
    data = doc.data
    versions = ", ".join(f"{k} {v}" for k, v in data["versions"].items())
    cuda = data["cuda"]
    cache = data["kernel_cache"]
    lines = [
        f"gradcheck doctor — {versions}",
        f"devices: {', '.join(data['devices'])}; CUDA devices: {cuda['devices']}; driver: "
        f"{cuda['driver'] or 'not available'}; toolkit (NVRTC): {cuda['toolkit'] or 'not available'}",
        f"kernel cache: {cache['path']} ({cache['files']} files, {cache['bytes'] / 2**20:.1f} MiB)",
    ]
    for row in data["cuda_compile"]:
        verdict = "ok" if row["ok"] else f"FAILED: {row['error']}"
        lines.append(
            f"cuda_compile sm_{row['arch']}: {row['kernels']}/{row['of']} gradcheck kernels to PTX in "
            f"{row['seconds']:.1f} s — {verdict}"
        )
    return _printed(lines, color, width)


def scenario_list(doc, *, color: bool = False, width: int = 100, verbose: bool = False) -> str:
    if doc.error is not None:
        return ""  # a usage error: the one stderr line says it
    table = _table()
    table.add_column("scenario", no_wrap=True)
    table.add_column("description / faults", overflow="fold")
    table.add_column("source", no_wrap=True)
    for info in doc.scenarios:
        faults = "".join(f"\n  --fault {k}: {v}" for k, v in info["faults"].items())
        table.add_row(*(_escape(cell) for cell in (info["name"], info["description"] + faults, info["source"])))
    return _printed([table], color, width)


def sweep(doc, *, color: bool = False, width: int = 100, verbose: bool = False) -> str:
    if doc.error is not None and not doc.rows:
        return ""  # a usage error: the one stderr line says it
    table = _table(title=_escape(f"gradcheck sweep {doc.scenario} over {doc.option}"))
    table.add_column(_escape(doc.option or "value"), justify="right")
    table.add_column("FD rel. error", justify="right")
    table.add_column("verdict")
    table.add_column("seconds", justify="right")
    for row in doc.rows:
        error = f"{row['fd_rel_error']:.3g}" if row["fd_rel_error"] is not None else "—"
        table.add_row(_escape(str(row["value"])), error, _escape(row["verdict"]), f"{row['seconds']:.1f}")
    return _printed([table], color, width) + (f"error: {doc.error}\n" if doc.error else "")


def new(doc, *, color: bool = False, width: int = 100, verbose: bool = False) -> str:
    if doc.error is not None:
        return ""  # a usage error: the one stderr line says it
    return f"wrote {doc.path}; run it with: {doc.run}\n"


def ci(doc, *, color: bool = False, width: int = 100, verbose: bool = False) -> str:
    """One line per configured scenario, then the totals."""
    report = doc.report
    if report.error is not None and not report.scenarios:
        return ""  # a usage error: the one stderr line says it
    lines = []
    for r in report.scenarios:
        bad = r.failing(report.fail_on)
        accepted = sum(1 for f in r.findings if f.baselined)
        detail = r.error or (", ".join(sorted({f.check for f in bad})) or "ok")
        extra = [f"{accepted} baselined"] * bool(accepted) + [f"{len(r.ignored)} ignored"] * bool(r.ignored)
        lines.append(f"{r.label or r.name}: {detail}" + (f" ({', '.join(extra)})" if extra else ""))
    failing = sum(1 for r in report.scenarios if r.failing(report.fail_on))
    errors = sum(1 for r in report.scenarios if r.error)
    ignored = f", {len(report.ignored)} ignored" if report.ignored else ""
    lines.append(
        f"{len(report.scenarios)} scenario(s), {failing} failing, {errors} error(s){ignored} — "
        f"exit {int(report.exit_code)}"
    )
    if report.error is not None:
        lines.append(f"error: {report.error}")
    return "\n".join(lines) + "\n"
