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
            data = read_toml(path).get("tool", {}).get("gradcheck")
            if data is not None:
                return _parse(data, str(path))
            break
    return default_config()


def default_config() -> Config:
    from gradcheck.scenario.catalog import builtin_infos

    return Config(entries=tuple(Entry(info.name) for info in builtin_infos()))


def read_toml(path: Path) -> dict:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except Exception as exc:
        raise UsageError(f"cannot read {path}: {exc}; fix the TOML") from None


KEYS = ("scenarios", "passes", "fail-on", "select", "ignore")  # select/ignore: engine.project_config
ENTRY_KEYS = ("spec", "fault", "set", "passes")


def _parse(data: dict, source: str) -> Config:
    """Every key and value checked before anything runs: a typo (``fail_on``) must not be silently ignored, and
    a string where a list belongs (``scenarios = "cartpole"``) must not run one scenario per letter."""
    where = f"{source}: [tool.gradcheck]"
    if not isinstance(data, dict):
        raise UsageError(f"{where} must be a table")
    known_keys(data, KEYS, where)
    raw = data.get("scenarios")
    if raw is not None and not isinstance(raw, list):
        raise UsageError(
            f"{where} scenarios must be a list of specs, e.g. scenarios = [{raw!r}], got {type(raw).__name__}"
        )
    if raw is not None and not raw:
        raise UsageError(f"{where} scenarios = [] runs nothing; list specs, or remove the key to run every built-in")
    entries = [_entry(item, f"{where} scenarios[{i}]") for i, item in enumerate(raw or [])]
    config = Config(entries=tuple(entries)) if entries else default_config()
    passes = _passes(data.get("passes", DEFAULT_PASSES), f"{where} passes")
    try:
        fail_on = severity(data.get("fail-on", FailOn.error), "fail-on")
    except UsageError as exc:
        raise UsageError(f"{where} {exc}") from None
    return Config(config.entries, passes, fail_on, source)


def _entry(item, where: str) -> Entry:
    if isinstance(item, str) and item:
        return Entry(item)
    if not isinstance(item, dict) or not isinstance(item.get("spec"), str) or not item["spec"]:
        raise UsageError(f"{where} must be a spec string or a table with 'spec', got {item!r}")
    known_keys(item, ENTRY_KEYS, where)
    fault = item.get("fault")
    if fault is not None and not isinstance(fault, str):
        raise UsageError(f"{where} fault must be a string, got {fault!r}")
    settings = item.get("set") or {}
    if not isinstance(settings, dict):
        raise UsageError(f'{where} set must be a table, e.g. set = {{ steps = "600" }}, got {settings!r}')
    passes = item.get("passes")
    return Entry(
        item["spec"],
        fault,
        {str(k): str(v) for k, v in settings.items()},
        None if passes is None else _passes(passes, f"{where} passes"),
    )


def _passes(value, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{where} must be a whole number of at least 1, got {value!r}")
    return value


def known_keys(table: dict, known: tuple[str, ...], where: str) -> None:
    import difflib

    for key in table:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise UsageError(f"{where}: unknown key {key!r}{hint} (keys: {', '.join(known)})")


def check_specs(entries: tuple[Entry, ...], source: str) -> None:
    """Every entry's spec names a scenario that exists (an unknown name or a missing file is a usage error before
    anything runs); nothing is imported. The rest of the one resolver (``loader.checked``: the scenario loaded, its
    fault and set keys) runs in ``run_entries``, in a worker, before the first entry runs."""
    from gradcheck.scenario.resolve import resolve

    for i, entry in enumerate(entries):
        try:
            resolve(entry.spec)
        except UsageError as exc:
            raise UsageError(f"{source}: scenarios[{i}]: {exc}") from None


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
        jobs.append(Job(entry.spec, entry_options, entry.label, where=f"{source}: scenarios[{i}] ({entry.label})"))
    # run_jobs checks every entry (its scenario loaded, its fault and set keys) before the first one runs
    return run_jobs(jobs, options, on_result=on_result, fresh_process=True)
