"""``gradcheck combine``: several JSON reports (the ranks of a launched job, or any runs of the same scenarios) read
back and merged into one Report, which every format prints and whose exit code is the combined verdict.

Each report's rank is what its environment says (engine.launcher writes ``rank`` and ``restart`` into a rank's
report), else a ``.rank<R>`` in its file name, else the file's name. Of the reports of one rank, the latest restart
is the rank's; the earlier attempts are named in the notes. Scenarios are merged by name. A finding is one per
check, severity and subject, with the ranks that reported it in its evidence (``ranks``, ``of``); one that only some
ranks reported says which in its message, and each rank's own line (its backwards, findings, error) is a note, so
what differs between ranks is in the report. Evidence is read back as the JSON it was (model.evidence's
PlainEvidence); a parameter's gradient table stays in each rank's own report.

A file that cannot be read as a gradcheck JSON report is named in the report's error (exit code 2) and the others
are still combined.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path

from gradcheck.model.errors import UsageError

SCHEMA_PREFIX = "gradcheck"


@dataclass(frozen=True)
class RankReport:
    """One report read back: whose it is, and its JSON."""

    path: Path
    rank: str
    restart: int
    data: dict


def read(path: Path) -> RankReport:
    """One JSON report; a UsageError (naming the file and why) when it is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot be read ({exc})") from None
    except json.JSONDecodeError as exc:
        why = f"not JSON ({exc.msg} at line {exc.lineno}): give reports written with --format json"
        raise UsageError(f"{path}: {why}") from None
    if not isinstance(data, dict) or not str(data.get("schema", "")).startswith(SCHEMA_PREFIX):
        raise UsageError(f"{path}: not a gradcheck JSON report (no gradcheck schema)")
    if not isinstance(data.get("scenarios"), list):
        raise UsageError(f"{path}: not a gradcheck JSON report (no scenarios)")
    environment = data.get("environment") or {}
    named = re.search(r"\.rank(\d+)", path.name)
    rank = str(environment.get("rank") or (named.group(1) if named else path.name))
    restart = re.search(r"\.restart(\d+)", path.name)
    return RankReport(path, rank, int(environment.get("restart") or (restart.group(1) if restart else 0)), data)


def combine_reports(paths: list[Path], fail_on=None):
    """The Report of ``paths`` merged; raises UsageError when none of them is a report."""
    from gradcheck.model.options import severity
    from gradcheck.model.report import Report

    read_back, unreadable = [], []
    for path in paths:
        try:
            read_back.append(read(path))
        except UsageError as exc:
            unreadable.append(str(exc))
    if not read_back:
        raise UsageError("; ".join(unreadable) if unreadable else "give the JSON reports to combine")
    latest, superseded = _latest_per_rank(read_back)
    ranks = [r.rank for r in latest]
    names = list(dict.fromkeys(s.get("name") for r in latest for s in r.data["scenarios"]))
    scenarios = tuple(_scenario(name, latest, ranks, superseded) for name in names)
    environment = dict(latest[0].data.get("environment") or {})
    for key in ("rank", "local_rank", "restart"):
        environment.pop(key, None)
    environment["combined"] = f"{len(latest)} report(s): " + ", ".join(f"{r.rank} ({r.path.name})" for r in latest)
    level = severity(fail_on if fail_on is not None else latest[0].data.get("fail_on") or "error")
    errors = [f"rank {r.rank}: {r.data['error']}" for r in latest if r.data.get("error")]
    if unreadable:
        errors.append("not combined: " + "; ".join(unreadable))
    return Report(
        environment=environment, scenarios=scenarios, fail_on=level, error="; ".join(errors) or None,
        error_code=_error_code(latest) if errors and not unreadable else None,
    )  # fmt: skip


def _error_code(reports: list[RankReport]):
    """The exit code of a rank's report that stopped with an error of its own (an interrupt, a usage error)."""
    from gradcheck.model.exit_codes import ExitCode

    for report in reports:
        if report.data.get("error"):
            try:
                return ExitCode(int(report.data.get("exit_code")))
            except (TypeError, ValueError):
                return None
    return None


def _latest_per_rank(reports: list[RankReport]) -> tuple[list[RankReport], list[str]]:
    by_rank: dict[str, list[RankReport]] = {}
    for report in reports:
        by_rank.setdefault(report.rank, []).append(report)
    latest, superseded = [], []
    for rank, attempts in by_rank.items():
        attempts.sort(key=lambda r: r.restart)
        latest.append(attempts[-1])
        superseded += [f"rank {rank}: {a.path.name} (restart {a.restart}) superseded by restart "
                       f"{attempts[-1].restart} ({attempts[-1].path.name})" for a in attempts[:-1]]  # fmt: skip
    latest.sort(key=lambda r: (not r.rank.isdigit(), int(r.rank) if r.rank.isdigit() else 0, r.rank))
    return latest, superseded


def _scenario(name: str, reports: list[RankReport], ranks: list[str], superseded: list[str]):
    """One scenario merged across the ranks that reported it."""
    from gradcheck.model.exit_codes import ExitCode
    from gradcheck.model.report import ParamSummary, ScenarioResult

    mine = [(r.rank, s) for r in reports for s in r.data["scenarios"] if s.get("name") == name]
    first = mine[0][1]
    errors = [f"rank {rank}: {s['error']}" for rank, s in mine if s.get("error")]
    notes = [_rank_line(rank, s) for rank, s in mine] + superseded
    if len(mine) > 1 and first.get("params"):
        notes.append(f"the gradient table and curves are rank {mine[0][0]}'s; each rank's report has its own")
    notes += [f"rank {rank}: did not report this scenario" for rank in ranks if rank not in {r for r, _ in mine}]
    findings = _findings(mine, "findings", len(ranks))
    return ScenarioResult(
        spec=first.get("spec") or name, name=name, fault=first.get("fault"), device=first.get("device"),
        options=first.get("options") or {}, passes=max(int(s.get("passes") or 0) for _r, s in mine),
        findings=findings, ignored=_findings(mine, "ignored", len(ranks)),
        error="; ".join(errors) or None, error_code=ExitCode.SCENARIO_ERROR if errors else None,
        seconds=max(float(s.get("seconds") or 0.0) for _r, s in mine), notes=tuple(notes),
        unit=first.get("unit") or "pass",
        params=_params(first.get("params") or (), findings, ParamSummary),
        losses=tuple(first.get("losses") or ()), sampling=first.get("sampling"),
        loss_curve=tuple((int(b), x) for b, x in first.get("loss_curve") or ()),
    )  # fmt: skip


def _params(rows, findings: tuple, summary) -> tuple:
    """The first rank's parameter rows, each verdict the combined findings' (a finding only rank 1 made flags the
    row too: the table never says "ok" above an error about the same gradient)."""
    from gradcheck.model.findings import checks_by_subject

    flagged = checks_by_subject(findings)
    params = (summary.from_dict(row) for row in rows if isinstance(row, dict))
    return tuple(replace(p, verdict=", ".join(flagged.get(p.subject, ())) or "ok") for p in params)


def _rank_line(rank: str, scenario: dict) -> str:
    found = scenario.get("findings") or []
    counts = ", ".join(f"{sum(f.get('severity') == s for f in found)} {s}(s)" for s in ("error", "warning", "info"))
    ended = f"; {scenario['error']}" if scenario.get("error") else ""
    unit = scenario.get("unit") or "pass"
    return f"rank {rank}: {scenario.get('passes', 0)} {unit}{'es' if unit.endswith('s') else 's'}, {counts}{ended}"


def _findings(mine: list, field: str, world: int) -> tuple:
    """One Finding per (check, severity, subject) over the ranks, the ranks that reported it in its evidence."""
    from gradcheck.model.findings import Finding, Severity

    seen: dict[tuple, tuple[dict, list[str]]] = {}
    for rank, scenario in mine:
        for found in scenario.get(field) or []:
            key = (found.get("check"), found.get("severity"), found.get("subject"))
            seen.setdefault(key, (found, []))[1].append(rank)
    merged = []
    for (check, severity, subject), (found, ranks) in seen.items():
        ranks = list(dict.fromkeys(ranks))
        message = found.get("message", "")
        if len(ranks) < world:
            message += f" [rank{'s' if len(ranks) > 1 else ''} {', '.join(ranks)} of {world}]"
        evidence = dict(found.get("evidence") or {}) | {"ranks": ranks, "of": world}
        merged.append(Finding(check, Severity.parse(severity), subject, message, found.get("hint", ""), evidence,
                              found.get("baselined"), found.get("ignored_by")))  # fmt: skip
    return tuple(merged)
