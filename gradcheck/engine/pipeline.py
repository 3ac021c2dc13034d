"""Many scenarios: choose where each runs (this process, or a worker process that can be stopped),
run them in order, and gather their results into one Report.

One scenario's journey (resolve → load → passes → checks) is ``scenario_run``; this layer only decides
the executor and never lets one scenario's failure stop the others.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from gradcheck.engine import interrupts
from gradcheck.engine.runner import Progress
from gradcheck.engine.scenario_run import preflight, run_one
from gradcheck.model.options import RunOptions
from gradcheck.model.report import Report, ScenarioResult


@dataclass(frozen=True)
class Job:
    """One scenario to run, with its own options (``gradcheck ci`` entries differ in fault, settings, passes)."""

    spec: str
    options: RunOptions
    label: str | None = None  # how the report names the job (ci: the config entry); None: the scenario's name
    where: str | None = None  # what a usage error in the job is prefixed with (ci: the config entry and its index)


def run(
    specs: Sequence[str],
    options: RunOptions,
    progress: Progress | None = None,
    on_scenario: Callable[[str, int, int], None] | None = None,
) -> Report:
    """Every spec with the same options. ``progress(name, pass, passes)`` after each pass;
    ``on_scenario(name, done, total)`` after each scenario."""

    def on_result(result: ScenarioResult, done: int, total: int) -> None:
        if on_scenario is not None:
            on_scenario(result.name, done, total)

    return run_jobs([Job(spec, options) for spec in specs], options, progress, on_result)


def run_jobs(
    jobs: Sequence[Job],
    options: RunOptions,
    progress: Progress | None = None,
    on_result: Callable[[ScenarioResult, int, int], None] | None = None,
    fresh_process: bool = False,
) -> Report:
    """``options`` gives what the jobs share: device, timeout (a worker process when set) and fail-on.
    ``on_result(result, done, total)`` after each job. ``fresh_process``: a new worker for every job, so
    no state carries over from one to the next."""
    from gradcheck.engine import environment

    device = environment.check_device(options.device) if options.device else environment.default_device()
    results = []
    stopped: tuple[str, object] | None = None  # (why, exit code) when a stop request ended the run early
    with interrupts.watch(), _executor(options, fresh_process) as executor:
        try:  # every spec, fault and --set key checked before any scenario's setup() runs
            executor.check([(job.spec, job.options.fault, job.options.settings, job.where) for job in jobs])
        except interrupts.Interrupted as exc:
            executor.abort()
            stopped, jobs = (f"interrupted by {exc.what} while checking the scenarios; none ran", exc.exit_code), ()
        for job in jobs:
            try:
                result = executor.run_one(job.spec, job.options, device, progress)
            except interrupts.Interrupted as exc:  # Ctrl-C or SIGTERM: stop now, report what finished
                executor.abort()
                why = f"interrupted by {exc.what} while running {job.label or job.spec}; "
                stopped = (why + f"{len(results)} of {len(jobs)} scenario(s) finished and are reported", exc.exit_code)
                break
            results.append(replace(result, label=job.label) if job.label else result)
            if on_result is not None:
                on_result(results[-1], len(results), len(jobs))
    env = environment.describe(device) | executor.versions  # after the runs: the scenarios imported newton
    error, code = stopped or (None, None)
    return Report(environment=env, scenarios=tuple(results), fail_on=options.fail_on, error=error, error_code=code)


class _InProcess:
    """The default executor: scenarios run in this process (fastest; tracebacks and debuggers work)."""

    versions: Mapping[str, str] = {}  # the report's environment already has this process's versions

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def abort(self) -> None:
        """Nothing to stop: the interrupted scenario ran in this process and has already unwound."""

    def check(self, requests) -> None:
        """scenario_run.preflight, here: the scenarios are loaded in this process anyway."""
        preflight(requests)

    def run_one(self, spec, options: RunOptions, device: str, progress: Progress | None = None):
        return run_one(spec, options, device, progress)


def _executor(options: RunOptions, fresh_process: bool):  # _InProcess or Isolated: the same four members
    if options.timeout is None:
        return _InProcess()
    from gradcheck.engine.isolation import Isolated

    return Isolated(options.timeout, fresh_process)
