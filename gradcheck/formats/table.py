"""Rich tables: per scenario, the params (grouped by family) with a per-pass norm sparkline,
then the findings, then a one-line summary. Readable at 80 columns."""

from __future__ import annotations

import io
import math

from gradcheck.model.findings import Severity
from gradcheck.model.paths import group_by_family

BARS = "▁▂▃▄▅▆▇█"
_SEVERITY_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def render(report, *, color: bool = False, width: int = 100) -> str:
    from rich.console import Console

    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width,
        force_terminal=color,
        no_color=not color,
        color_system="standard" if color else None,
        highlight=False,
        emoji=False,
    )
    env = report.environment
    versions = ", ".join(f"{k} {env[k]}" for k in ("gradcheck", "warp", "newton") if env.get(k))
    console.print(f"gradcheck report — device {env.get('device') or '?'} — {versions}")
    if report.error:
        console.print(f"[bold red]error:[/] {report.error}")
    for result in report.scenarios:
        _scenario(console, result)
    console.print(_summary(report))
    return buffer.getvalue()


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


def _scenario(console, result) -> None:
    from rich.table import Table

    title = result.name + (f" --fault {result.fault}" if result.fault else "")
    options = " ".join(f"{k}={v}" for k, v in result.options.items())
    console.print()
    console.rule(f"[bold]{title}[/]" + (f"  ({options})" if options else ""), align="left")
    if result.error:
        console.print(f"[bold red]error:[/] {result.error}")
        if result.traceback:
            console.print(result.traceback, markup=False)
        if not result.passes:
            return  # else the passes that finished before it, checked, as for any scenario
    units = "passes" if result.unit == "pass" else f"{result.unit}s"
    console.print(f"{result.passes} {units} on {result.device} in {result.seconds:.2f} s; loss {_loss(result.losses)}")
    for note in result.notes:
        console.print(f"[bold yellow]note:[/] {_escape(note)}")
    if result.clip:
        before, after = result.clip.total_before, result.clip.total_after
        if before:
            console.print(
                f"--clip-norm {result.clip.max_norm:g}: global gradient norm {_num(before[-1])} → "
                f"{_num(after[-1])} on the last pass"
            )

    params = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    params.add_column("param gradient", overflow="fold", ratio=3)
    params.add_column("pass 1", justify="right", no_wrap=True)
    params.add_column("last", justify="right", no_wrap=True)
    params.add_column("last/1", justify="right", no_wrap=True)
    params.add_column("norm per pass", no_wrap=True)
    if result.clip:
        params.add_column("clipped", justify="right", no_wrap=True)
    params.add_column("verdict", overflow="fold", ratio=1)
    for fam, members in group_by_family(result.params, key=lambda p: p.subject).items():
        label = members[0].subject if len(members) == 1 else f"{fam} ×{len(members)}"
        norms = _family_norms(members)
        ratio = norms[-1] / norms[0] if norms and norms[0] and math.isfinite(norms[0]) else math.nan
        verdicts = sorted({v for m in members for v in m.verdict.split(", ") if v != "ok"})
        verdict = ", ".join(verdicts) if verdicts else "ok"
        style = "red" if verdicts else "green"
        cells = [
            label,
            _num(norms[0] if norms else math.nan),
            _num(norms[-1] if norms else math.nan),
            _num(ratio, ratio=True),
            sparkline(norms),
        ]
        if result.clip:
            clipped = [m.clipped_norms[-1] if m.clipped_norms else None for m in members]
            known = [c for c in clipped if c is not None]
            cells.append(_num(math.sqrt(sum(c * c for c in known)) if known else math.nan))
        params.add_row(*cells, f"[{style}]{verdict}[/]")
    console.print(params)
    if result.blame is not None:
        _blame(console, result.blame)

    if result.findings:
        findings = Table(box=None, pad_edge=False, show_edge=False, header_style="bold", show_lines=False)
        findings.add_column("severity", no_wrap=True)
        findings.add_column("check", no_wrap=True)
        findings.add_column("subject · message · fix", overflow="fold")
        for f in result.findings:
            style = _SEVERITY_STYLE[f.severity]
            findings.add_row(
                f"[{style}]{f.severity.label}[/]",
                f.check,
                f"[bold]{_escape(f.subject)}[/]\n{_escape(f.message)}\n[dim]fix: {_escape(f.hint)} "
                f"(gradcheck explain {f.check})[/]",
            )
        console.print()
        console.print(findings)
    else:
        console.print("[green]no findings[/]")


def _blame(console, blame) -> None:
    """One row per kernel of the per-launch adjoint test, the wrong ones first."""
    from rich.table import Table

    console.print()
    if blame.skipped:
        console.print(f"per-launch adjoint test ({blame.why}): not run: {_escape(blame.skipped)}")
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
    for k in blame.kernels:
        wrong = k.statuses.get("mismatch", 0) + k.statuses.get("assigns", 0) + k.statuses.get("no-backward", 0)
        other = ", ".join(f"{n} {s}" for s, n in sorted(k.statuses.items()) if s not in ("ok", "mismatch", "assigns"))
        where = k.where.rsplit("/", 1)[-1] if k.where else "?"
        style = "red" if wrong else "green"
        table.add_row(k.kernel, where, str(k.launches), f"[{style}]{wrong}[/]", f"{k.worst_rel_error:.2g}", other)
    console.print(table)
    reasons = blame.not_checked
    if reasons:
        console.print(
            f"not checked: {sum(reasons.values())} launches — "
            + "; ".join(f"{n} {_escape(reason)}" for reason, n in reasons.items())
        )


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
    return "\n" + ", ".join(parts) + f" — exit {int(report.exit_code)} (fail-on {report.fail_on.label})"


def _family_norms(members) -> list[float]:
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
