"""Frozen results: what the formats render and what the exit code is computed from.

A scenario that could not run is a value (status "error"), not an exception, so every other
scenario is still reported and the JSON stays valid.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from gradcheck.model.exit_codes import ExitCode, combine, of_failing
from gradcheck.model.findings import Finding, Severity

SCHEMA = "gradcheck/1"


@dataclass(frozen=True)
class ParamSummary:
    name: str
    subject: str
    shape: tuple
    dtype: str
    norms: tuple[float, ...]  # gradient L2 norm per pass, read right after backward
    verdict: str  # "ok" or the names of the checks that flagged it
    clipped_norms: tuple[float | None, ...] = ()  # after --clip-norm, per pass (empty without it)
    role: str = "declared"  # declared (params()) | updated (the program updated it from its gradient) | leaf
    backwards: tuple[int, ...] = ()  # the pass or backward (1-based) each of ``norms`` was read after; () unknown

    @property
    def ratio(self) -> float:
        if not self.norms or not self.norms[0] or math.isnan(self.norms[0]):
            return math.nan
        return self.norms[-1] / self.norms[0]

    @classmethod
    def from_dict(cls, data: dict) -> ParamSummary:
        """A parameter's row read back from a JSON report (``gradcheck combine``): a missing number is NaN."""
        return cls(
            name=str(data.get("name", "")), subject=str(data.get("subject", "")),
            shape=tuple(data.get("shape") or ()), dtype=str(data.get("dtype", "")),
            norms=tuple(_float(n) for n in data.get("norms") or ()), verdict=str(data.get("verdict", "")),
            clipped_norms=tuple(data.get("clipped_norms") or ()), role=str(data.get("role") or "declared"),
            backwards=tuple(int(b) for b in data.get("norm_backwards") or ()),
        )  # fmt: skip

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "subject": self.subject,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "norms": [_json_float(n) for n in self.norms],
            "ratio": _json_float(self.ratio),
            "verdict": self.verdict,
            "role": self.role,
            "norm_backwards": list(self.backwards),
        } | ({"clipped_norms": [_json_float(n) for n in self.clipped_norms]} if self.clipped_norms else {})


@dataclass(frozen=True)
class ClipSummary:
    """``--clip-norm``: the global gradient norm of the params before and after clipping, per pass."""

    max_norm: float
    total_before: tuple[float, ...]
    total_after: tuple[float, ...]

    def to_dict(self) -> dict:
        return {
            "max_norm": self.max_norm,
            "total_before": list(self.total_before),
            "total_after": list(self.total_after),
        }


@dataclass(frozen=True)
class FDSummary:
    """The finite-difference check in a few numbers (the details are in the fd-mismatch finding's evidence)."""

    mode: str
    max_direction_error: float | None
    max_element_error: float | None
    rollouts: int
    skipped: str | None  # why no comparison was made
    noise_floor: float = 0.0  # errors below this are invisible under the loss's noise: 0.0 error means "below"
    noise_level: float | None = None  # sigma of the loss's computational noise, when a disagreement measured it
    converged: bool = True  # every direction's finite difference settled (False: part of the check had no verdict)
    restored_arrays: int = 0  # program arrays put back to the first pass's start before each rollout
    state_note: str | None = None  # why they were not (over the memory budget)

    def to_dict(self) -> dict:
        return {
            "mode": self.mode,
            "max_direction_error": self.max_direction_error,
            "max_element_error": self.max_element_error,
            "noise_floor": self.noise_floor,
            "noise_level": self.noise_level,
            "converged": self.converged,
            "rollouts": self.rollouts,
            "skipped": self.skipped,
            "restored_arrays": self.restored_arrays,
            "state_note": self.state_note,
        }


@dataclass(frozen=True)
class KernelBlame:
    """The per-launch adjoint test of one kernel: how its launches fared."""

    kernel: str
    where: str | None  # file:line of its first launch
    launches: int
    statuses: Mapping[str, int]  # "ok", "mismatch", "assigns", "split", "no-verdict", "not-checked" → count
    worst_rel_error: float  # over the launches with a verdict
    worst_launch: int | None  # its tape index
    not_checked: Mapping[str, int] = field(default_factory=dict)  # why its launches were not checked → count

    def to_dict(self) -> dict:
        return {
            "kernel": self.kernel,
            "where": self.where,
            "launches": self.launches,
            "statuses": dict(self.statuses),
            "worst_rel_error": _json_float(self.worst_rel_error),
            "worst_launch": self.worst_launch,
            "not_checked": dict(self.not_checked),
        }


@dataclass(frozen=True)
class BlameSummary:
    """The per-launch adjoint test (adjoint-mismatch) in a few numbers, one row per kernel."""

    why: str
    skipped: str | None
    note: str | None
    seconds: float
    kernels: tuple[KernelBlame, ...] = ()

    @property
    def not_checked(self) -> dict[str, int]:
        """Why launches were not checked, one reason per launch, counted over every kernel (most common first)."""
        counts: dict[str, int] = {}
        for kernel in self.kernels:
            for reason, count in kernel.not_checked.items():
                counts[reason] = counts.get(reason, 0) + count
        return dict(sorted(counts.items(), key=lambda item: -item[1]))

    def to_dict(self) -> dict:
        return {
            "why": self.why,
            "skipped": self.skipped,
            "note": self.note,
            "seconds": round(self.seconds, 3),
            "kernels": [k.to_dict() for k in self.kernels],
            "not_checked": self.not_checked,
        }


@dataclass(frozen=True)
class ScenarioResult:
    spec: str
    name: str
    fault: str | None = None
    device: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)
    passes: int = 0
    params: tuple[ParamSummary, ...] = ()
    findings: tuple[Finding, ...] = ()
    ignored: tuple[Finding, ...] = ()  # suppressed by --ignore/--select (model.suppressions): listed, never judged
    error: str | None = None
    error_code: ExitCode | None = None  # USAGE or SCENARIO_ERROR when error is set
    traceback: str | None = None  # only filled with --debug
    seconds: float = 0.0
    losses: tuple[float | None, ...] = ()
    notes: tuple[str, ...] = ()  # what the driver did differently, e.g. a pass whose backward was not launched
    clip: ClipSummary | None = None  # --clip-norm
    fd: FDSummary | None = None  # finite differences
    blame: BlameSummary | None = None  # per-launch adjoint test, when it ran
    label: str | None = None  # the job's name when it is not the scenario's (gradcheck ci: the config entry)
    unit: str = "pass"  # what ``passes`` counts: "pass" (gradcheck run) or "backward" (a program under exec)
    # a long program audited by a cadence: {"first", "every", "backwards", "audited"}; None: every backward was
    sampling: Mapping[str, int] | None = None
    # (pass or backward, loss) over the run: every pass of ``run``; a long program's bounded sample (the backwards
    # its gradients' histories kept, the ones audited in full): what the report page plots
    loss_curve: tuple[tuple[int, float | None], ...] = ()

    @property
    def status(self) -> str:
        if self.error is not None:
            return "error"
        return "findings" if self.findings else "ok"

    def failing(self, fail_on: Severity) -> tuple[Finding, ...]:
        """Findings at or above ``fail_on`` that no baseline accepted: what makes the exit code 1 (4 when they are
        all gradcheck's own failure, ``internal-error``)."""
        return tuple(f for f in self.findings if f.severity >= fail_on and not f.baselined)

    def exit_code(self, fail_on: Severity) -> ExitCode:
        if self.error is not None:  # a scenario or program that failed: 3 whatever was found
            return self.error_code or ExitCode.SCENARIO_ERROR
        return of_failing(f.check for f in self.failing(fail_on))

    def to_dict(self) -> dict:
        label = {"label": self.label} if self.label is not None else {}
        return (
            label
            | {
                "name": self.name,
                "spec": self.spec,
                "fault": self.fault,
                "device": self.device,
                "options": dict(self.options),
                "status": self.status,
                "error": self.error,
                "passes": self.passes,
                "unit": self.unit,
                "seconds": round(self.seconds, 3),
                "losses": [_json_float(x) for x in self.losses],
                "notes": list(self.notes),
                "clip": self.clip.to_dict() if self.clip else None,
                "fd": self.fd.to_dict() if self.fd else None,
                "blame": self.blame.to_dict() if self.blame else None,
                "params": [p.to_dict() for p in self.params],
                "findings": [f.to_dict() for f in self.findings],
                "ignored": [f.to_dict() for f in self.ignored],
            }
            | ({"sampling": dict(self.sampling)} if self.sampling is not None else {})
            | {"loss_curve": [[b, _json_float(x)] for b, x in self.loss_curve]}
        )


@dataclass(frozen=True)
class Report:
    KIND: ClassVar[str] = "report"  # the formats registry's key (model.documents holds the other commands')
    environment: Mapping[str, str]
    scenarios: tuple[ScenarioResult, ...]
    fail_on: Severity = Severity.ERROR
    error: str | None = None  # a usage error that stopped the run before any scenario
    error_code: ExitCode | None = None
    checks: tuple[str, ...] = ()  # every registered check, in registry order (JUnit: one testcase each)
    not_judged: Mapping[str, str] = field(default_factory=dict)  # check -> why it saw no evidence (exec's run-only)
    # check -> {"summary", "explain"}: what the formats code review reads describe each rule with (SARIF)
    rule_texts: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    source_root: str | None = None  # --source-root: what sarif/github/gitlab paths are relative to (None: git's top)

    @property
    def exit_code(self) -> ExitCode:
        codes = [s.exit_code(self.fail_on) for s in self.scenarios]
        if self.error is not None:
            codes.append(self.error_code or ExitCode.USAGE)
        return combine(codes)

    @property
    def ignored(self) -> tuple[Finding, ...]:
        """Findings suppressed by --ignore/--select, over every scenario: the summary says how many."""
        return tuple(f for s in self.scenarios for f in s.ignored)

    def to_dict(self) -> dict:
        out = {
            "schema": SCHEMA,
            "environment": dict(self.environment),
            "fail_on": self.fail_on.label,
            "scenarios": [s.to_dict() for s in self.scenarios],
            "exit_code": int(self.exit_code),
            "ignored_count": len(self.ignored),
        }
        if self.error is not None:
            out["error"] = self.error
        return out


def _float(x) -> float:
    """A number read back from JSON, where NaN and infinities were written as null."""
    return math.nan if x is None else float(x)


def _json_float(x):
    """JSON has no NaN/Infinity: they become null."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return None
    return x
