"""What each command other than run/blame/exec reports, as one frozen object the formats render.

``run``, ``blame`` and ``exec`` report a :class:`~gradcheck.model.report.Report`; the other commands' results
are the documents here. Each has a ``KIND`` (the formats registry's key) and ``to_dict()`` (its JSON, whose keys
are public: add freely, never rename), and carries ``error`` so a usage error is still one document in the
format asked for (``--format json`` stdout stays one JSON object).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from gradcheck.model.exit_codes import ExitCode


@dataclass(frozen=True)
class CheckText:
    name: str
    summary: str
    explain: str | None = None  # the full text: only for the check asked about


@dataclass(frozen=True)
class ExplainDoc:
    """``gradcheck explain [CHECK]``: every check's one-line summary, or one check's full explanation."""

    KIND: ClassVar[str] = "explain"
    checks: tuple[CheckText, ...] = ()
    error: str | None = None

    def to_dict(self) -> dict:
        return {
            "schema": "gradcheck-explain/1",
            "checks": [
                {"name": c.name, "summary": c.summary} | ({"explain": c.explain} if c.explain is not None else {})
                for c in self.checks
            ],
        } | _error(self.error)


@dataclass(frozen=True)
class SelftestRow:
    variant: str
    expect: tuple[str, ...]  # checks that must fire; empty: nothing may fire
    fired: tuple[str, ...]
    result: str  # "ok", "MISS", "FALSE POSITIVE", "skipped", "error"
    detail: str | None = None  # why it was skipped, or the scenario's error

    @property
    def passed(self) -> bool:
        return self.result in ("ok", "skipped")


@dataclass(frozen=True)
class SelftestDoc:
    """``gradcheck selftest``: every built-in fault caught by its check, every clean variant silent."""

    KIND: ClassVar[str] = "selftest"
    rows: tuple[SelftestRow, ...] = ()
    device: str | None = None
    error: str | None = None
    error_code: ExitCode | None = None

    @property
    def exit_code(self) -> ExitCode:
        if self.error is not None:
            return self.error_code or ExitCode.USAGE
        return ExitCode.OK if all(r.passed for r in self.rows) else ExitCode.FINDINGS

    def counts(self) -> dict[str, int]:
        skipped = sum(r.result == "skipped" for r in self.rows)
        failed = sum(not r.passed for r in self.rows)
        return {"passed": len(self.rows) - failed - skipped, "failed": failed, "skipped": skipped}

    def to_dict(self) -> dict:
        rows = [
            {"variant": r.variant, "expect": list(r.expect), "fired": list(r.fired), "result": r.result}
            | ({"detail": r.detail} if r.detail else {})
            for r in self.rows
        ]
        return (
            {"schema": "gradcheck-selftest/1", "device": self.device, "rows": rows}
            | self.counts()
            | _error(self.error)
            | {"exit_code": int(self.exit_code)}
        )


@dataclass(frozen=True)
class DoctorDoc:
    """``gradcheck doctor``: versions, devices, CUDA, the kernel cache, gradcheck's kernels compiled per arch."""

    KIND: ClassVar[str] = "doctor"
    data: Mapping = field(default_factory=dict)  # engine.doctor.diagnose's answer (its keys are the JSON's)
    error: str | None = None

    @property
    def failed(self) -> bool:
        return any(not row["ok"] for row in self.data.get("cuda_compile", ()))

    @property
    def exit_code(self) -> ExitCode:
        if self.error is not None:
            return ExitCode.USAGE
        return ExitCode.FINDINGS if self.failed else ExitCode.OK

    def to_dict(self) -> dict:
        return {"schema": "gradcheck-doctor/1"} | dict(self.data) | _error(self.error)


@dataclass(frozen=True)
class ScenarioListDoc:
    """``gradcheck list``: built-in and installed scenarios with their faults. Its JSON is a list (as it always
    was); only a usage error makes it an object."""

    KIND: ClassVar[str] = "list"
    scenarios: tuple[Mapping, ...] = ()  # catalog ScenarioInfo.to_dict(): name, description, faults, source
    error: str | None = None

    def to_dict(self):
        if self.error is not None:
            return {"schema": "gradcheck-list/1", "scenarios": [], "error": self.error}
        return [dict(s) for s in self.scenarios]


@dataclass(frozen=True)
class SweepDoc:
    """``gradcheck sweep``: the finite-difference error of one scenario as one option varies."""

    KIND: ClassVar[str] = "sweep"
    scenario: str
    fault: str | None = None
    device: str | None = None
    option: str | None = None
    fixed: Mapping[str, str] = field(default_factory=dict)
    rows: tuple[Mapping, ...] = ()  # engine.sweep SweepRow.to_dict()
    error: str | None = None

    def to_dict(self) -> dict:
        return {
            "schema": "gradcheck-sweep/1",
            "scenario": self.scenario,
            "fault": self.fault,
            "device": self.device,
            "option": self.option,
            "fixed": dict(self.fixed),
            "rows": [dict(r) for r in self.rows],
        } | _error(self.error)


@dataclass(frozen=True)
class NewDoc:
    """``gradcheck new NAME``: the scenario file it wrote, and how to run it."""

    KIND: ClassVar[str] = "new"
    path: str | None = None
    error: str | None = None

    @property
    def run(self) -> str | None:
        return f"gradcheck run {self.path.rsplit('/', 1)[-1]}" if self.path else None

    def to_dict(self) -> dict:
        return {"schema": "gradcheck-new/1", "path": self.path, "run": self.run} | _error(self.error)


@dataclass(frozen=True)
class CiDoc:
    """``gradcheck ci``: the configured scenarios' Report and where the configuration came from."""

    KIND: ClassVar[str] = "ci"
    report: object  # a Report
    source: str | None = None

    def to_dict(self) -> dict:
        report = self.report
        environment = dict(report.environment)
        return {
            "schema": "gradcheck-ci/1",
            "config": self.source,
            "fail_on": report.fail_on.label if report.scenarios or not report.error else None,
            "scenarios": [r.to_dict() | {"environment": environment} for r in report.scenarios],
            "exit_code": int(report.exit_code),
            "ignored_count": len(report.ignored),
        } | _error(report.error)


def _error(message: str | None) -> dict:
    return {"error": message} if message is not None else {}
