"""`gradcheck ci`: a configured list of scenarios, each in its own subprocess, for CI pipelines.

Configuration: ``[tool.gradcheck]`` in the project's pyproject.toml::

    [tool.gradcheck]
    passes = 2
    fail-on = "error"
    scenarios = [
        "cartpole",
        { spec = "cartpole", set = { steps = "600" } },
        { spec = "tests/scenarios/my_rollout.py", fault = "no-zero", passes = 3 },
    ]

Default: every built-in scenario's clean variant. Each entry runs as ``gradcheck run ... --format
json`` in a subprocess with a timeout, so one that crashes, hangs or segfaults becomes an error
entry and every other scenario is still reported; the JSON and JUnit outputs stay complete.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from gradcheck.errors import UsageError


@dataclass(frozen=True)
class Entry:
    spec: str
    fault: str | None = None
    settings: dict = field(default_factory=dict)
    passes: int | None = None

    @property
    def label(self) -> str:
        extra = "".join(f" --set {k}={v}" for k, v in self.settings.items())
        return self.spec + extra + (f" --fault {self.fault}" if self.fault else "")


@dataclass(frozen=True)
class Config:
    entries: tuple[Entry, ...]
    passes: int = 2
    fail_on: str = "error"
    source: str = "built-in defaults"


def load_config(directory: Path) -> Config:
    """``[tool.gradcheck]`` from the nearest pyproject.toml at or above ``directory``, or the defaults."""
    for folder in (directory, *directory.parents):
        path = folder / "pyproject.toml"
        if path.is_file():
            data = _toml(path).get("tool", {}).get("gradcheck")
            if data is not None:
                return _parse(data, str(path))
            break
    return default_config()


def default_config() -> Config:
    from gradcheck.catalog import builtin_infos

    return Config(entries=tuple(Entry(info.name) for info in builtin_infos()))


def _toml(path: Path) -> dict:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except Exception as exc:
        raise UsageError(f"cannot read {path}: {exc}; fix the TOML") from None


def _parse(data: dict, source: str) -> Config:
    entries = []
    for i, item in enumerate(data.get("scenarios", [])):
        if isinstance(item, str):
            entries.append(Entry(item))
        elif isinstance(item, dict) and isinstance(item.get("spec"), str):
            settings = {str(k): str(v) for k, v in (item.get("set") or {}).items()}
            entries.append(Entry(item["spec"], item.get("fault"), settings, item.get("passes")))
        else:
            raise UsageError(f"{source}: [tool.gradcheck] scenarios[{i}] must be a spec string or a table with 'spec'")
    config = default_config() if not entries else Config(entries=tuple(entries))
    return Config(config.entries, int(data.get("passes", 2)), str(data.get("fail-on", "error")), source)


def shard(entries: tuple[Entry, ...], spec: str | None) -> tuple[Entry, ...]:
    """``i/n``: the i-th of n interleaved shards (1-based)."""
    if not spec:
        return entries
    try:
        index, count = (int(x) for x in spec.split("/"))
        if not 1 <= index <= count:
            raise ValueError
    except ValueError:
        raise UsageError(f"--shard {spec!r} must be I/N with 1 <= I <= N, e.g. --shard 1/2") from None
    return entries[index - 1 :: count]


def run_entry(entry: Entry, passes: int, fail_on: str, device: str | None, timeout: float) -> dict:
    """One scenario in a subprocess: its JSON scenario entry, or an error entry when it crashed or hung."""
    command = [sys.executable, "-m", "gradcheck", "run", entry.spec, "--format", "json", "--quiet"]
    command += ["--passes", str(entry.passes or passes), "--fail-on", fail_on]
    if entry.fault:
        command += ["--fault", entry.fault]
    for key, value in entry.settings.items():
        command += ["--set", f"{key}={value}"]
    if device:
        command += ["--device", device]
    try:
        proc = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, env=dict(os.environ)
        )
    except subprocess.TimeoutExpired:
        return _error_entry(entry, f"{entry.label}: timed out after {timeout:g} s (--timeout); it was stopped")
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        how = f"was killed by signal {-proc.returncode}" if proc.returncode < 0 else f"exited {proc.returncode}"
        tail = (proc.stderr.strip().splitlines() or [""])[-1][:300]
        return _error_entry(entry, f"{entry.label}: the run {how} without a report ({tail})")
    scenarios = report.get("scenarios") or []
    if not scenarios:
        return _error_entry(entry, report.get("error") or f"{entry.label}: no scenario in the report")
    result = scenarios[0]
    result["label"] = entry.label
    result["environment"] = report.get("environment", {})
    return result


def _error_entry(entry: Entry, message: str) -> dict:
    return {
        "name": entry.spec,
        "label": entry.label,
        "spec": entry.spec,
        "fault": entry.fault,
        "options": dict(entry.settings),
        "status": "error",
        "error": message,
        "params": [],
        "findings": [],
    }


def apply_baseline(results: list[dict], baseline: dict) -> None:
    """Mark findings listed in the baseline as accepted (they no longer fail the run)."""
    accepted = {(a["scenario"], a["check"], a["subject"]) for a in baseline.get("accepted", [])}
    for result in results:
        for finding in result.get("findings", []):
            finding["baselined"] = (result.get("label"), finding["check"], finding["subject"]) in accepted


def baseline_of(results: list[dict], fail_on: str) -> dict:
    from gradcheck.findings import Severity

    threshold = Severity.parse(fail_on)
    return {
        "schema": "gradcheck-baseline/1",
        "accepted": [
            {"scenario": r.get("label"), "check": f["check"], "subject": f["subject"]}
            for r in results
            for f in r.get("findings", [])
            if Severity.parse(f["severity"]) >= threshold
        ],
    }


def failing(result: dict, fail_on: str) -> list[dict]:
    from gradcheck.findings import Severity

    threshold = Severity.parse(fail_on)
    return [
        f for f in result.get("findings", []) if Severity.parse(f["severity"]) >= threshold and not f.get("baselined")
    ]
