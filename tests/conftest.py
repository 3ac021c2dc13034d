"""Shared helpers: run scenarios in-process (fast) or through the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
SCENARIOS = TESTS / "scenarios"
ROOT = TESTS.parent


SLOW_TIMEOUT_S = 1800  # a slow-lane test's deadline; the fast lane's is pyproject's `timeout = 600`


def pytest_collection_modifyitems(config, items):
    """pytest-timeout (the dev extra) gives every test a deadline; the long runs of the slow lane get a longer one
    unless they set their own. Nothing to do where the plugin is not installed (the compat venvs)."""
    if not config.pluginmanager.hasplugin("timeout"):
        return
    for item in items:
        if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))


@pytest.fixture(autouse=True, scope="session")
def _warp_defaults_to_the_cpu():
    """In-process tests run on the CPU, as in CI, also on a machine with a GPU: there Warp's default device is
    cuda:0, and a test that makes its arrays on "cpu" but launches without ``device=`` would launch on the GPU
    with host pointers. The CUDA tests (test_cuda.py, the cuda variants) name their device; programs run in a
    subprocess keep Warp's own default."""
    import warp as wp

    wp.init()
    wp.set_device("cpu")
    yield


def default_sigint() -> None:
    """``preexec_fn`` for a child a test signals or whose SIGINT handling it compares: SIGINT at its default, as a
    terminal gives it. A background job (``.ci/run &``, ``make test &``) starts with SIGINT ignored, and a child
    inherits an ignored signal through fork and exec: without this, its Ctrl-C would do nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def sigint_raises():
    """SIGINT raises KeyboardInterrupt in this process for the test's duration (Python's own handler), whatever the
    process inherited (ignored in a background job, where a test's SIGINT to itself would be lost and the scenario
    it should stop would sleep on); the disposition before is put back after."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


POLL_S = 0.05  # how often wait_for looks again; not a timing assumption: every wait ends at its deadline


def wait_for(condition, *, within: float, what: str, proc: subprocess.Popen | None = None):
    """Poll ``condition()`` until it gives a truthy value, returned; the test fails after ``within`` seconds, or as
    soon as ``proc`` exited without the condition becoming true (its stderr in the message)."""
    deadline = time.monotonic() + within
    while True:
        value = condition()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            value = condition()  # it may have come true just before the process ended
            if value:
                return value
            _, err = proc.communicate(timeout=60)
            pytest.fail(f"{what}: the process exited ({proc.returncode}) first; stderr:\n{str(err)[-2000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {within:g} s")
        time.sleep(POLL_S)


def _descendants(pid: int) -> list[int]:
    """The processes under ``pid`` (children, theirs, ...), from /proc; empty where there is no /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def stop(proc: subprocess.Popen) -> None:
    """A test's cleanup: ``proc`` and every process under it (a worker, a scenario's child) killed if a failed
    assertion left them running, so none outlives its test."""
    if proc.poll() is None:
        for pid in _descendants(proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        proc.kill()
        proc.communicate(timeout=60)


def run_scenario(spec: str, fault: str | None = None, passes: int = 5, **settings):
    """One scenario through the whole pipeline on CPU; returns (ScenarioResult, Report)."""
    from gradcheck.engine.pipeline import run
    from gradcheck.model.options import RunOptions

    report = run([spec], RunOptions(device="cpu", passes=passes, fault=fault, settings=settings))
    return report.scenarios[0], report


def cli(*args: str, env: dict | None = None, cwd: Path | None = None, timeout: float = 600):
    """The real CLI in a subprocess, like a user or CI would run it (no TTY)."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("FORCE_COLOR", None)
    return subprocess.run(
        [sys.executable, "-m", "gradcheck", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=str(cwd or ROOT),
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def invoke(*args: str):
    """The command through Typer's CliRunner in this process (Warp already initialised): Click's Result."""
    from typer.testing import CliRunner

    from gradcheck.cli.app import app

    return CliRunner().invoke(app, list(args))


def cli_in_process(*args: str) -> subprocess.CompletedProcess:
    """``invoke`` shaped as ``cli``'s result: for the many cases whose process-level behaviour (exit status,
    streams) one subprocess case of the same test already shows."""
    result = invoke(*args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(["gradcheck", *args], result.exit_code, result.stdout, result.stderr)


def exec_json(*args: str, **kwargs):
    """``gradcheck exec --format json ARGS``: (the process, the one scenario of the report after the program's own
    output)."""
    proc = cli("exec", "--format", "json", *args, **kwargs)
    out = proc.stdout
    assert "{\n" in out, f"exit {proc.returncode}\n{proc.stderr[-3000:]}"
    (scenario,) = json.loads(out[out.index("{\n") :])["scenarios"]
    return proc, scenario


def exec_cases(program, cases, env: dict | None = None, workers: int = 3, timeout: float = 300) -> dict:
    """``exec_json(PROGRAM, "--case", CASE)`` for each case, ``workers`` at a time: case -> (process, scenario)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {
            case: pool.submit(exec_json, str(program), "--case", case, env=env, timeout=timeout) for case in cases
        }
    return {case: future.result() for case, future in futures.items()}


def worst_difference(program, *argv: str) -> float:
    """The ``max relative gradient difference`` a test program's ``--check`` prints (its gradients against pure
    torch's), run under plain python."""
    out = subprocess.run([sys.executable, str(program), *argv, "--check"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return float(out.stdout.split("max relative gradient difference:")[1].split()[0])


def audited(program, *argv: str, **options):
    """``gradcheck exec PROGRAM ARGV`` in this process (``audit_program``; ``options``: its keep_going, checks,
    cadence…): the ScenarioResult of a program that must have run to its end, exit status 0 (its error in the
    failure message otherwise)."""
    from gradcheck.engine.program_audit import audit_program

    result, run = audit_program(str(program), list(argv), **options)
    assert run.status in (None, 0) and result.error is None, run.error
    return result


def line_of(where, text: str, after: str | None = None) -> int:
    """The line number holding ``text`` in ``where`` (a file's Path, or a function: its source file's numbering),
    so no test hard-codes a line: the only line holding it, or with ``after`` the first one after the only line
    holding ``after``."""
    import inspect

    if isinstance(where, Path):
        lines, first, name = where.read_text(encoding="utf-8").splitlines(), 1, where.name
    else:
        (lines, first), name = inspect.getsourcelines(where), where.__name__
    numbered = list(enumerate(lines, first))
    start = first - 1
    if after is not None:
        (start,) = [n for n, line in numbered if after in line]
        found = [n for n, line in numbered if n > start and text in line][:1]
    else:
        found = [n for n, line in numbered if text in line]
    assert len(found) == 1, (name, text, found)
    return found[0]


def cli_json(*args: str, **kwargs):
    proc = cli(*args, "--format", "json", **kwargs)
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(
            f"stdout is not JSON (exit {proc.returncode}):\n{proc.stdout[:2000]}\nstderr:\n{proc.stderr[-2000:]}"
        )
    return proc, data


def by_check(findings, check: str):
    return [f for f in findings if (f.check if hasattr(f, "check") else f["check"]) == check]


def _warp_has_retain_grad() -> bool:
    import inspect

    import warp as wp

    return "retain_grad" in inspect.signature(wp.array.__init__).parameters


def _warp_has_subscript_array_annotations() -> bool:
    """``wp.array[float]`` as a struct field annotation (newer Warp; older ones need wp.array(dtype=float))."""
    import warp as wp

    try:  # built by hand: this module's `from __future__ import annotations` would make the annotation a string
        wp.struct(type("_Probe", (), {"__annotations__": {"values": wp.array[float]}, "__module__": __name__}))
    except Exception:
        return False
    return True


# Features of newer Warp some test scenarios use; `make test-compat` runs those test modules on old Warp too.
needs_retain_grad = pytest.mark.skipif(
    not _warp_has_retain_grad(), reason="this warp-lang has no wp.array(retain_grad=...)"
)
needs_subscript_annotations = pytest.mark.skipif(
    not _warp_has_subscript_array_annotations(), reason="this warp-lang has no wp.array[float] struct annotations"
)


def _warp_frees_struct_grads() -> bool:
    import warp as wp

    from gradcheck.model.known_bugs import STRUCT_GRAD_FREED

    return STRUCT_GRAD_FREED.affects(wp.__version__)


# Tests of the >= 1.7.2 behaviour (the struct keeps an old gradient alive: stale, not dangling); before it,
# warp#720 frees the buffer and tests/test_warp_versions.py checks the dangling finding instead.
needs_struct_grad_keepalive = pytest.mark.skipif(
    _warp_frees_struct_grads(), reason="this warp-lang frees the old gradient buffer (warp#720)"
)
