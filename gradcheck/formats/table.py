"""Rich tables: per scenario, the params (grouped by family) with a per-pass norm sparkline,
then the findings, then a one-line summary. Readable at 80 columns.

The default view is meant to be read on one screen: findings that share a check and a cause are one row
(finding_groups), and long params or per-launch tables show their first rows and count the rest. Nothing
leaves the view uncounted; ``verbose`` lists every finding with its full message and every row."""

from __future__ import annotations

import io
import math

from gradcheck.formats.finding_groups import FindingGroup, group_findings
from gradcheck.model.findings import Severity
from gradcheck.model.paths import family, group_by_family
from gradcheck.model.trace import DEFAULT_ADJOINT_TEST

BARS = "▁▂▃▄▅▆▇█"
PARAM_ROWS = 12  # param families the default view lists (the flagged ones first) before counting the rest
BLAME_ROWS = 8  # kernels of the per-launch adjoint test the default view lists (the wrong ones come first)
_SEVERITY_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def text_console(buffer, color: bool, width: int):
    """A Rich console writing into ``buffer``: ``width`` columns, ANSI colour only when asked, no guessing at
    highlights or emoji in program text (a subject like ``states[5]`` must print as written)."""
    from rich.console import Console

    return Console(
        file=buffer,
        width=width,
        force_terminal=color,
        no_color=not color,
        color_system="standard" if color else None,
        highlight=False,
        emoji=False,
    )


def render(report, *, color: bool = False, width: int = 100, verbose: bool = False) -> str:
    """The report as text. ``verbose``: every finding on its own row with its full message, every param
    family and every kernel; the default view groups and counts them so a run's report fits one screen."""
    buffer = io.StringIO()
    console = text_console(buffer, color, width)
    console.print(header(report), markup=False)
    if report.error:
        console.print(f"[bold red]error:[/] {_escape(report.error)}")
    for result in report.scenarios:
        _scenario(console, result, verbose)
    console.print(_summary(report))
    return buffer.getvalue()


def header(report) -> str:
    env = report.environment
    versions = ", ".join(f"{k} {env[k]}" for k in ("gradcheck", "warp", "newton") if env.get(k))
    return f"gradcheck report — device {env.get('device') or '?'} — {versions}"


def titles(result) -> tuple[str, str]:
    """(the scenario's title, its options), as its rule shows them."""
    title = result.name + (f" --fault {result.fault}" if result.fault else "")
    return title, " ".join(f"{k}={v}" for k, v in result.options.items())


def units_line(result) -> str:
    """How many passes (or backwards) ran, where, how long, and the loss."""
    plural = "passes" if result.unit == "pass" else f"{result.unit}s"
    units = result.unit if result.passes == 1 else plural
    return f"{result.passes} {units} on {result.device or 'no device'} in {result.seconds:.2f} s; loss {_loss(result.losses)}"


def sparkline(values) -> str:
    finite = [v for v in values if isinstance(v, float) and math.isfinite(v)]
    if not finite:
        return "·" * len(values)
    lo, hi = min(finite), max(finite)
    out = []
    for v in values:
        if not (isinstance(v, float) and math.isfinite(v)):
            out.append("!")
        elif hi == lo:
            out.append(BARS[3] if hi else "·")
        else:
            out.append(BARS[round((v - lo) / (hi - lo) * (len(BARS) - 1))])
    return "".join(out)


def _scenario(console, result, verbose: bool) -> None:
    title, options = titles(result)
    console.print()
    console.rule(f"[bold]{_escape(title)}[/]" + (f"  ({_escape(options)})" if options else ""), align="left")
    if result.error:
        console.print(f"[bold red]error:[/] {_escape(result.error)}")
        if result.traceback:
            console.print(result.traceback, markup=False)
        if not result.passes:
            return  # else the passes that finished before it, checked, as for any scenario
    console.print(units_line(result), markup=False)
    for note in result.notes:
        console.print(f"[bold yellow]note:[/] {_escape(note)}")
    if result.clip:
        before, after = result.clip.total_before, result.clip.total_after
        if before:
            console.print(
                f"--clip-norm {result.clip.max_norm:g}: global gradient norm {_num(before[-1])} → "
                f"{_num(after[-1])} on the last pass"
            )
    _params(console, result, verbose)
    if result.blame is not None:
        _blame(console, result.blame, verbose)
    if result.findings:
        _findings(console, result.findings, verbose)
    else:
        console.print("[green]no findings[/]")


def _params(console, result, verbose: bool) -> None:
    """One row per param family; past PARAM_ROWS families (default view), the flagged ones and the first
    others, in report order, then how many more and how many of those are flagged. Nothing at all when the run
    ended before any gradient was read (a header over no rows says nothing)."""
    from rich.table import Table

    if not result.params:
        return
    families, shown = param_rows(result, verbose)
    rows = [param_values(members, verdicts, result.clip) for members, verdicts in shown]
    params = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    params.add_column("param gradient", overflow="fold", ratio=3)
    params.add_column("pass 1", justify="right", no_wrap=True)
    params.add_column("last", justify="right", no_wrap=True)
    params.add_column("last/1", justify="right", no_wrap=True)
    params.add_column("norm per pass", no_wrap=True)
    if result.clip:
        params.add_column("clipped", justify="right", no_wrap=True)
    params.add_column("verdict", overflow="fold", ratio=1)
    params.columns[0].min_width = name_width(rows, [str(c.header) for c in params.columns], console.width)
    for row in rows:
        style = "green" if row[-1] == "ok" else "red"
        params.add_row(_escape(row[0]), *row[1:-1], f"[{style}]{row[-1]}[/]")
    console.print(params)
    if len(shown) < len(families):
        console.print(more_params_line(families, shown))


def param_rows(result, verbose: bool) -> tuple[list, list]:
    """(every param family with the checks that flag it, the families the view lists)."""
    silenced = {f.check for f in result.ignored} - {f.check for f in result.findings}
    by_family = group_by_family(result.params, key=lambda p: p.subject).values()
    families = [(members, _verdicts(members, silenced)) for members in by_family]
    return families, families if verbose else _first_rows(families, PARAM_ROWS)


def more_params_line(families, shown) -> str:
    flagged = sum(1 for _m, v in families if v) - sum(1 for _m, v in shown if v)
    return f"+{len(families) - len(shown)} more param gradient(s), {flagged} flagged (--verbose lists them)"


def name_width(rows, headers, width: int) -> int:
    """The param column's width from the plain cells (param_values): its longest word (a name breaks at its " ×N",
    never inside `states[0].joint_q.grad`), less what the unbreakable number columns and the verdict's longest word
    need on a narrow terminal (there a name folds, as it must)."""
    if not rows:
        return 1
    numbers = sum(max(len(headers[i]), *(len(row[i]) for row in rows)) for i in range(1, len(headers) - 1))
    verdict = max(len(word) for row in rows for word in row[-1].split())
    name = max(len(word) for row in rows for word in row[0].split())
    return max(8, min(name, width - numbers - verdict - 2 * (len(headers) - 1)))


def _verdicts(members, silenced=frozenset()) -> list[str]:
    """The checks that flag these params, less those whose every finding the user suppressed."""
    return sorted({v for m in members for v in m.verdict.split(", ") if v != "ok" and v not in silenced})


def _first_rows(families, limit: int):
    """Up to ``limit`` families in report order, the flagged ones chosen before the ok ones."""
    if len(families) <= limit:
        return families
    ranked = sorted(range(len(families)), key=lambda i: (not families[i][1], i))[:limit]
    return [families[i] for i in sorted(ranked)]


def param_values(members, verdicts, clip) -> list[str]:
    """One param family's row as plain text: its name, first and last norm, their ratio, the norms' sparkline, the
    clipped norm when clipping, the verdict ("ok" or the checks that flag it)."""
    label = members[0].subject if len(members) == 1 else f"{family(members[0].subject)} ×{len(members)}"
    norms = family_norms(members)
    ratio = norms[-1] / norms[0] if norms and norms[0] and math.isfinite(norms[0]) else math.nan
    cells = [
        label,
        _num(norms[0] if norms else math.nan),
        _num(norms[-1] if norms else math.nan),
        _num(ratio, ratio=True),
        sparkline(norms),
    ]
    if clip:
        clipped = [m.clipped_norms[-1] if m.clipped_norms else None for m in members]
        known = [c for c in clipped if c is not None]
        cells.append(_num(math.sqrt(sum(c * c for c in known)) if known else math.nan))
    return [*cells, ", ".join(verdicts) if verdicts else "ok"]


def _findings(console, findings, verbose: bool) -> None:
    """Default view: one row per check and cause (finding_groups); verbose: one row per finding."""
    from rich.table import Table

    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold", show_lines=False)
    table.add_column("severity", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("subject · message · fix", overflow="fold")
    if verbose:
        rows = [(f.severity, f.check, _finding_cell(f)) for f in findings]
    else:
        rows = [(g.severity, g.check, _group_cell(g)) for g in group_findings(findings)]
    for severity, check, cell in rows:
        table.add_row(f"[{_SEVERITY_STYLE[severity]}]{severity.label}[/]", check, cell)
    console.print()
    console.print(table)


def _finding_cell(f) -> str:
    return f"[bold]{_escape(f.subject)}[/]\n{_escape(f.message)}\n" + _fix(f.hint, f.check)


def _group_cell(group: FindingGroup) -> str:
    """One finding: as in verbose. Several: how many, the subjects with their numbers worst first (the
    first few, then how many more), the worst one's message (its numbers and where the trouble starts: the launch
    a NaN comes from, the copy a state is), and the fix once."""
    if len(group.members) == 1:
        return _finding_cell(group.worst)
    shown, more = group.shown()
    names = ", ".join(_escape(m.compact()) for m in shown) + (f", +{more} more" if more else "")
    order = ", worst first" if group.members[0].measure else ""
    worst = f"{_escape(group.worst.subject)}: {_escape(group.worst.message)}"  # where it starts, in numbers
    return f"[bold]{len(group.members)} findings[/]{order}: {names}\n{worst}\n" + _fix(group.fix, group.check)


def _fix(hint: str, check: str) -> str:
    return f"[dim]fix: {_escape(hint)} (gradcheck explain {check})[/]"


def _blame(console, blame, verbose: bool) -> None:
    """One row per kernel of the per-launch adjoint test, the wrong ones first; past BLAME_ROWS kernels
    (default view), how many more and how many of those have wrong launches."""
    from rich.table import Table

    console.print()
    if blame.skipped:
        console.print(f"per-launch adjoint test ({blame.why}): not run: {_escape(blame.skipped)}")
        return
    if blame.why.startswith(DEFAULT_ADJOINT_TEST) and not verbose and not any(_wrong(k) for k in blame.kernels):
        console.print(_default_test_line(blame))
        return
    launches = sum(k.launches for k in blame.kernels)
    console.print(
        f"per-launch adjoint test ({blame.why}): {launches} launches of {len(blame.kernels)} kernels in {blame.seconds:.1f} s"
    )
    if blame.note:
        console.print(f"[bold yellow]note:[/] {_escape(blame.note)}")
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    table.add_column("kernel", overflow="fold", ratio=3)
    table.add_column("launched at", overflow="fold", ratio=2)
    table.add_column("launches", justify="right", no_wrap=True)
    table.add_column("wrong", justify="right", no_wrap=True)
    table.add_column("worst rel", justify="right", no_wrap=True)
    table.add_column("other", overflow="fold", ratio=2)
    shown = blame.kernels if verbose else blame.kernels[:BLAME_ROWS]
    for k in shown:
        wrong = _wrong(k)
        other = ", ".join(f"{n} {s}" for s, n in sorted(k.statuses.items()) if s not in ("ok", "mismatch", "assigns"))
        where = k.where.rsplit("/", 1)[-1] if k.where else "?"
        style = "red" if wrong else "green"
        cells = (_escape(k.kernel), _escape(where), str(k.launches), f"[{style}]{wrong}[/]")
        table.add_row(*cells, f"{k.worst_rel_error:.2g}", _escape(other))
    console.print(table)
    hidden = blame.kernels[len(shown) :]
    if hidden:
        wrong = sum(1 for k in hidden if _wrong(k))
        console.print(f"+{len(hidden)} more kernel(s), {wrong} with wrong launches (--verbose lists them)")
    reasons = blame.not_checked
    if reasons:
        console.print(
            f"not checked: {sum(reasons.values())} launches — "
            + "; ".join(f"{n} {_escape(reason)}" for reason, n in reasons.items())
        )


def _default_test_line(blame, escape=None) -> str:
    """exec's default adjoint test when no kernel is wrong: one line (the table is for --verbose and --blame).
    ``escape``: how the reasons are put in (Rich's markup escape; ``str`` for formats.plain_table)."""
    escape = escape or _escape
    statuses: dict[str, int] = {}
    for k in blame.kernels:
        for status, n in k.statuses.items():
            statuses[status] = statuses.get(status, 0) + n
    tested = sum(1 for k in blame.kernels if any(s != "not-checked" for s in k.statuses))
    counts = ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()) if s != "not-checked")
    line = f"adjoint test ({blame.why}): {tested} of {len(blame.kernels)} kernels tested ({counts or 'none'})"
    line += f" in {blame.seconds:.1f} s"
    if blame.not_checked:
        line += "; not tested: " + "; ".join(f"{n} {escape(reason)}" for reason, n in blame.not_checked.items())
    return line


def _wrong(kernel) -> int:
    return sum(kernel.statuses.get(s, 0) for s in ("mismatch", "assigns", "no-backward"))


def _summary(report) -> str:
    counts = {s: 0 for s in Severity}
    errors = 0
    for r in report.scenarios:
        errors += r.error is not None
        for f in r.findings:
            counts[f.severity] += 1
    parts = [f"{len(report.scenarios)} scenario(s)"]
    parts += [f"{counts[s]} {s.label}(s)" for s in sorted(Severity, reverse=True)]
    if errors:
        parts.append(f"{errors} failed to run")
    ignored = getattr(report, "ignored", ())  # findings a suppression left out of the scenarios, when there is one
    if ignored:
        parts.append(f"{len(ignored)} ignored")
    return "\n" + ", ".join(parts) + f" — exit {int(report.exit_code)} (fail-on {report.fail_on.label})"


def family_norms(members) -> list[float]:
    """Per-pass L2 norm over all arrays of a family."""
    passes = max(len(m.norms) for m in members)
    out = []
    for k in range(passes):
        values = [m.norms[k] for m in members if k < len(m.norms)]
        if any(not math.isfinite(v) for v in values):
            out.append(math.nan)
        else:
            out.append(math.sqrt(sum(v * v for v in values)))
    return out


def _num(x: float, ratio: bool = False) -> str:
    if not math.isfinite(x):
        return "—"
    return f"×{x:.3g}" if ratio else f"{x:.4g}"


def _loss(losses) -> str:
    values = [x for x in losses if x is not None]
    if not values:
        return "n/a"
    if all(v == values[0] for v in values):
        return f"{values[0]:.6g} (same every pass)"
    return f"{values[0]:.6g} … {values[-1]:.6g}"


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)
