"""`gradcheck ci`: a configured list of scenarios, each in a fresh worker process, for CI pipelines.

Configuration: ``[tool.gradcheck]`` in the project's pyproject.toml::

    [tool.gradcheck]
    passes = 2
    fail-on = "error"
    scenarios = [
        "cartpole",
        { spec = "cartpole", set = { steps = "600" } },
        { spec = "tests/scenarios/my_rollout.py", fault = "no-zero", passes = 3 },
    ]

Default: every built-in scenario's clean variant. Each entry runs in its own worker process with a
timeout (``isolation``), so one that crashes, hangs or segfaults becomes an error entry and every
other scenario is still reported; the results come back as ScenarioResult objects, so baselines,
JSON, JUnit and the exit code all work on the one Report model ``gradcheck run`` uses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gradcheck.model.errors import UsageError
from gradcheck.model.findings import Severity
from gradcheck.model.options import FailOn, RunOptions, severity
from gradcheck.model.report import Report, ScenarioResult

DEFAULT_PASSES = 2


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
    passes: int = DEFAULT_PASSES
    fail_on: Severity = Severity.ERROR
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
    from gradcheck.scenario.catalog import builtin_infos

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
    try:
        passes = data.get("passes", DEFAULT_PASSES)
        fail_on = severity(data.get("fail-on", FailOn.error), "fail-on")
        RunOptions(passes=passes)  # the same validation as --passes
    except UsageError as exc:
        raise UsageError(f"{source}: [tool.gradcheck] {exc}") from None
    return Config(config.entries, passes, fail_on, source)


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


def run_entries(
    entries: tuple[Entry, ...],
    options: RunOptions,
    on_result: Callable[[ScenarioResult, int, int], None] | None = None,
    source: str = "[tool.gradcheck]",
) -> Report:
    """Every entry in a fresh worker process (``options.timeout`` each), as one Report.

    ``options`` carries what the entries share (device, passes unless an entry sets its own, fail-on,
    timeout); each entry adds its fault and settings."""
    from dataclasses import replace

    from gradcheck.engine.pipeline import Job, run_jobs

    jobs = []
    for i, entry in enumerate(entries):
        try:
            entry_options = replace(
                options,
                fault=entry.fault,
                settings=entry.settings,
                passes=options.passes if entry.passes is None else entry.passes,
            )
        except UsageError as exc:
            raise UsageError(f"{source}: scenarios[{i}] ({entry.label}): {exc}") from None
        jobs.append(Job(entry.spec, entry_options, entry.label))
    return run_jobs(jobs, options, on_result=on_result, fresh_process=True)
