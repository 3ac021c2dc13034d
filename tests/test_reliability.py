"""Reliability: every bad input, signal and broken output handled the documented way.

The contract (README, exit codes): 0/1/2/3, 130 on Ctrl-C and 143 on SIGTERM; one ``gradcheck: error: …`` line on
stderr naming the subject and the fix; no traceback without --debug; with --format json, stdout is always one
JSON object; nothing already computed is lost. Each class is tested through the real CLI once, and its variants
through the pipeline in this process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import POLL_S, ROOT, SCENARIOS, by_check, cli, cli_json, default_sigint, run_scenario, stop, wait_for

from gradcheck.model.exit_codes import ExitCode
from gradcheck.model.options import RunOptions

ENDS = str(SCENARIOS / "ends_gradcheck.py")
FINISHES = ENDS + ":Finishes"
ENDS_LOSS = 0.5 * (1.0 + 4.0 + 9.0)  # ends_gradcheck's loss on a clean pass: 0.5 * sum(x * x), x = [1, 2, 3]


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("gradcheck: error:")]


def assert_clean_failure(proc, code: int) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert len(error_lines(proc.stderr)) == 1, proc.stderr[-2000:]


# -- a scenario cannot end gradcheck -------------------------------------------------------------------------


def test_a_scenario_calling_sys_exit_is_a_scenario_error_with_the_report():
    """sys.exit(0) in forward() used to exit 0 with no report: CI green with nothing checked."""
    passes, at_pass = 4, 3
    proc, data = cli_json(
        "run", FINISHES, ENDS, "--set", "action=exit0", "--set", f"at_pass={at_pass}", "--passes", str(passes),
        "--device", "cpu",
    )  # fmt: skip
    assert_clean_failure(proc, ExitCode.SCENARIO_ERROR)
    finished, failed = data["scenarios"]
    assert finished["status"] != "error" and finished["passes"] == passes
    assert failed["error"].startswith(
        f"ends-gradcheck: forward() raised SystemExit(0) (sys.exit) on pass {at_pass} of {passes}"
    )
    assert "not end the process" in failed["error"]
    finished_passes = at_pass - 1  # the passes that finished are kept
    assert failed["passes"] == finished_passes and failed["losses"] == [ENDS_LOSS] * finished_passes
    assert [p["name"] for p in failed["params"]] == ["x"]


@pytest.mark.parametrize("hook", ["setup", "params", "forward", "backward", "after_backward", "zero"])
@pytest.mark.parametrize("action", ["exit0", "exit5", "keyboard"])
def test_every_hook_that_tries_to_end_the_process_becomes_its_error(hook, action):
    result, report = run_scenario(ENDS, passes=3, action=action, hook=hook, at_pass="2")
    assert report.exit_code == ExitCode.SCENARIO_ERROR
    raised = {"exit0": "SystemExit(0)", "exit5": "SystemExit(5)", "keyboard": "KeyboardInterrupt"}[action]
    assert result.error.startswith(f"ends-gradcheck: {hook}() raised {raised}"), result.error
    if hook not in ("setup", "params"):
        assert "on pass 2 of 3" in result.error and result.passes == 1


def test_keyboard_interrupt_raised_by_a_scenario_in_a_worker_is_its_error():
    proc, data = cli_json(
        "run", ENDS, "--set", "action=keyboard", "--set", "at_pass=2", "--device", "cpu", "--timeout", "120"
    )
    assert_clean_failure(proc, ExitCode.SCENARIO_ERROR)
    assert data["scenarios"][0]["error"].startswith("ends-gradcheck: forward() raised KeyboardInterrupt on pass 2")


# -- broken gradients that passed ----------------------------------------------------------------------------


def test_a_nan_loss_with_finite_gradients_is_an_error():
    result, report = run_scenario(ENDS, passes=2, action="nan-loss-only")
    (finding,) = by_check(result.findings, "nonfinite")
    assert finding.subject == "loss" and "the loss is nan on 2 of 2 passes" in finding.message
    assert report.exit_code == ExitCode.FINDINGS
    json.dumps(report.to_dict(), allow_nan=False)  # NaN evidence is JSON null, not a crash at output


def test_params_returning_nothing_is_a_scenario_error():
    proc, data = cli_json("run", ENDS, "--set", "action=empty-params", "--device", "cpu")
    assert_clean_failure(proc, ExitCode.SCENARIO_ERROR)
    assert "params() returned an empty dict, so no gradient would be checked" in data["scenarios"][0]["error"]


def test_the_api_refuses_what_the_cli_refuses():
    import gradcheck
    from gradcheck.model.errors import UsageError
    from gradcheck.testing import assert_gradients_healthy

    for options, text in (
        ({"fd": "bogus"}, "--fd 'bogus'"),
        ({"max_norm": 0}, "--max-norm must be a positive number"),
        ({"passes": 0}, "--passes must be at least 1"),
    ):
        with pytest.raises(UsageError, match=text):
            gradcheck.check(ENDS, device="cpu", **options)
    with pytest.raises(UsageError, match="did you mean 'nonfinite'"):
        assert_gradients_healthy(ENDS, checks=["nonfnite"])
    with pytest.raises(UsageError, match="must be a list of check names"):
        assert_gradients_healthy(ENDS, checks="nonfinite")


# -- the command line ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "spring-chain", "--passes", "abc"], "--passes must be a whole number, got 'abc'"),
        (["run", "spring-chain", "--max-norm=big"], "--max-norm must be a number, got 'big'"),
        (["run", "spring-chain", "--bogus"], "No such option: --bogus"),
        (
            ["run", "spring-chain", "--format=json", "--fail-on", "warn"],
            "--fail-on: 'warn' is not one of 'error', 'warning'",
        ),
    ],
)
def test_a_command_line_the_parser_rejects_still_gives_json(args, message):
    proc = cli(*args, "--format", "json") if "--format=json" not in args else cli(*args)
    assert_clean_failure(proc, ExitCode.USAGE)
    assert error_lines(proc.stderr)[0].startswith(f"gradcheck: error: {message}")
    assert "see `gradcheck run --help`" in proc.stderr
    data = json.loads(proc.stdout)
    assert message in data["error"] and data["scenarios"] == [] and data["exit_code"] == ExitCode.USAGE


def test_a_bad_format_is_one_line_and_exit_2():
    proc = cli("run", "spring-chain", "--format", "xml")
    assert_clean_failure(proc, ExitCode.USAGE)
    assert (
        "--format 'xml' is not one gradcheck run prints; use table, json, junit, sarif, github or gitlab" in proc.stderr
    )
    assert proc.stdout == ""


def test_an_option_value_setup_rejects_is_a_usage_error():
    """--set at_pass=abc: int('abc') in setup() is the option's fault (exit 2), not the scenario's (exit 3)."""
    proc, data = cli_json("run", ENDS, "--set", "at_pass=abc", "--device", "cpu")
    assert_clean_failure(proc, ExitCode.USAGE)
    assert "setup() rejected --set at_pass=abc: invalid literal for int()" in data["scenarios"][0]["error"]
    result, _ = run_scenario(ENDS, passes=2, at_pass="abc")
    assert result.error_code == ExitCode.USAGE
    result, _ = run_scenario(ENDS, passes=2, action="exit5", hook="setup")  # no option at fault: exit 3
    assert result.error_code == ExitCode.SCENARIO_ERROR


def test_builtin_option_values_are_validated():
    from gradcheck.scenarios._featherstone import newton_missing

    if newton_missing():
        pytest.skip(newton_missing())
    for value in ("abc", "-3"):
        result, report = run_scenario("cartpole", passes=1, steps=value)
        assert report.exit_code == ExitCode.USAGE and "setup() rejected --set steps=" in result.error


def test_sweep_of_an_unknown_scenario_says_so_once():
    proc = cli("sweep", "nosuch", "--set", "steps=1,2", "--device", "cpu")
    assert_clean_failure(proc, ExitCode.USAGE)
    assert "unknown scenario 'nosuch'" in proc.stderr


def test_closed_stdout_is_one_line_not_a_traceback():
    proc = subprocess.run(
        f"{sys.executable} -m gradcheck run spring-chain --device cpu --passes 1 >&-",
        shell=True,
        capture_output=False,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert_clean_failure(proc, ExitCode.USAGE)
    assert "stdout is closed" in proc.stderr and "--output FILE" in proc.stderr


# -- [tool.gradcheck] ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('fail_on = "error"', "unknown key 'fail_on'; did you mean 'fail-on'?"),
        ('passes = "two"', "passes must be a whole number of at least 1, got 'two'"),
        ("passes = -3", "passes must be a whole number of at least 1, got -3"),
        ('fail-on = "warn"', "unknown severity 'warn'"),
        ('scenarios = "spring-chain"', "scenarios must be a list of specs"),
        ("scenarios = []", "scenarios = [] runs nothing"),
        ('scenarios = ["nosuch"]', "scenarios[0]: unknown scenario 'nosuch'"),
        ('scenarios = [{ spec = "spring-chain", fualt = "x" }]', "unknown key 'fualt'; did you mean 'fault'?"),
    ],
)
def test_the_ci_config_is_validated_before_anything_runs(tmp_path, body, message):
    from gradcheck.engine.ci import check_specs, load_config
    from gradcheck.model.errors import UsageError

    (tmp_path / "pyproject.toml").write_text(f"[tool.gradcheck]\n{body}\n")
    with pytest.raises(UsageError, match=message.replace("[", r"\[").replace("]", r"\]").replace("?", r"\?")):
        config = load_config(tmp_path)
        check_specs(config.entries, config.source)


def test_ci_with_a_bad_config_gives_one_line_and_json(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.gradcheck]\nfail_on = "error"\n')
    proc, data = cli_json("ci", "--device", "cpu", cwd=tmp_path)
    assert_clean_failure(proc, ExitCode.USAGE)
    assert "did you mean 'fail-on'" in data["error"] and data["exit_code"] == ExitCode.USAGE


# -- output files ----------------------------------------------------------------------------------------------


def test_output_errors_are_one_line_and_never_overwrite_an_input(tmp_path):
    scenario = tmp_path / "mine.py"
    scenario.write_text((SCENARIOS / "ends_gradcheck.py").read_text())
    before = scenario.read_text()
    onto_input = cli("run", str(scenario), "--device", "cpu", "--output", str(scenario))
    assert_clean_failure(onto_input, ExitCode.USAGE)
    assert "is one of this run's inputs" in onto_input.stderr and scenario.read_text() == before
    missing = cli("run", str(scenario), "--device", "cpu", "--output", str(tmp_path / "nope" / "r.json"))
    assert_clean_failure(missing, ExitCode.USAGE)
    onto_dir = cli("run", str(scenario), "--device", "cpu", "--output", str(tmp_path))
    assert_clean_failure(onto_dir, ExitCode.USAGE)
    assert "is a directory" in onto_dir.stderr
    junit = cli("ci", "--device", "cpu", "--junit", str(tmp_path / "nope" / "r.xml"), cwd=tmp_path)
    assert_clean_failure(junit, ExitCode.USAGE)
    assert "--junit" in junit.stderr and "--output" not in junit.stderr
    config = tmp_path / "pyproject.toml"
    config.write_text('[tool.gradcheck]\nscenarios = ["spring-chain"]\n')
    onto_config = cli("ci", "--device", "cpu", "--junit", str(config), cwd=tmp_path)
    assert_clean_failure(onto_config, ExitCode.USAGE)
    assert "is one of this run's inputs" in onto_config.stderr and config.read_text().startswith("[tool.gradcheck]")


def test_reports_are_written_atomically(tmp_path, monkeypatch):
    """A write that fails half-way (disk full) leaves the previous report whole and no temporary behind."""
    import errno

    import typer

    from gradcheck.cli import output

    report = tmp_path / "report.json"
    output.write_atomically(report, '{"first": 1}\n')
    assert report.read_text() == '{"first": 1}\n'

    def full(_fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(output.os, "fsync", full)
    with pytest.raises(typer.Exit):
        output.write_atomically(report, '{"second": 2}\n')
    assert report.read_text() == '{"first": 1}\n' and os.listdir(tmp_path) == ["report.json"]


# -- signals and processes -------------------------------------------------------------------------------------


STARTS_WITHIN_S = 240  # from the command to the scenario's sleep: a worker's Warp import and a cold kernel cache
STOPS_WITHIN_S = 10  # from Ctrl-C or SIGTERM to gradcheck's exit, with its report ("within seconds")
ENDS_WITHIN_S = 60  # the deadline for a process that should have ended already
HANG_TIMEOUT_S = 5  # --timeout for the scenario that hangs in its first forward, before any kernel is compiled


def _start(args, marker):
    """The CLI with SIGINT at its default (a background job inherits it ignored), JSON on stdout."""
    return subprocess.Popen(
        [sys.executable, "-m", "gradcheck", *args, "--format", "json", "--quiet", "--device", "cpu"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "GRADCHECK_TEST_CHILD_PID": str(marker)},
        preexec_fn=default_sigint,
    )


def _pid_when_written(marker, proc) -> int:
    """The pid the scenario announces (ends_gradcheck.py writes it in one step) once it is about to sleep."""
    announced = wait_for(
        lambda: marker.exists() and marker.read_text(), within=STARTS_WITHIN_S, what="the scenario's sleep", proc=proc
    )
    return int(announced)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as status:
            return "zombie" not in status.read().lower()
    except OSError:
        return False


def _end_sleeper(pid: int) -> None:
    """Cleanup after a failed assertion: the scenario's hour-long sleeper child, if it is still that process."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            if b"time.sleep(3600)" in cmdline.read():
                os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


@pytest.mark.skipif(sys.platform != "linux", reason="process groups and /proc")
@pytest.mark.parametrize(
    ("signum", "extra", "code"),
    [
        (signal.SIGINT, [], ExitCode.INTERRUPTED),
        (signal.SIGTERM, ["--timeout", "120"], ExitCode.TERMINATED),
    ],
)
def test_a_stop_request_reports_what_finished_and_ends_the_worker_group(tmp_path, signum, extra, code):
    """Ctrl-C (in this process) and SIGTERM (with a worker whose scenario started a child): stopped within
    seconds, the scenario that finished still reported, the exit code 128 + signal, no process left behind."""
    marker = tmp_path / "pid"
    action = "child" if extra else "sleep"
    proc = _start(["run", FINISHES, ENDS, "--set", f"action={action}", "--set", "at_pass=2", *extra], marker)
    sleeper = None
    try:
        sleeper = _pid_when_written(marker, proc)
        started = time.monotonic()
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=ENDS_WITHIN_S)
        assert time.monotonic() - started < STOPS_WITHIN_S
        assert proc.returncode == code and "Traceback" not in err, err[-2000:]
        data = json.loads(out)
        finished = data["scenarios"]
        assert [s["name"] for s in finished] == ["finishes"] and finished[0]["passes"] == RunOptions().passes
        assert data["error"].startswith("interrupted by") and "1 of 2 scenario(s) finished" in data["error"]
        if extra:
            assert not _alive(sleeper), "the scenario's child process outlived the worker"
    finally:
        stop(proc)
        if extra and sleeper is not None:
            _end_sleeper(sleeper)


@pytest.mark.skipif(sys.platform != "linux", reason="process groups and /proc")
def test_a_timeout_ends_the_children_a_scenario_started(tmp_path):
    marker = tmp_path / "pid"
    proc = _start(["run", ENDS, "--set", "action=child", "--timeout", str(HANG_TIMEOUT_S)], marker)
    child = None
    try:
        child = _pid_when_written(marker, proc)
        out, err = proc.communicate(timeout=HANG_TIMEOUT_S + ENDS_WITHIN_S)  # returns: no child keeps the pipes open
        assert proc.returncode == ExitCode.SCENARIO_ERROR and f"timed out after {HANG_TIMEOUT_S} s" in err
        assert not _alive(child)
        assert json.loads(out)["scenarios"][0]["status"] == "error"
    finally:
        stop(proc)
        if child is not None:
            _end_sleeper(child)


def test_ctrl_c_during_the_api_reaches_the_caller(tmp_path, monkeypatch, sigint_raises):
    """gradcheck.check() in a test suite: the user's Ctrl-C is a KeyboardInterrupt for the caller, not a scenario
    error in the returned report (a scenario raising KeyboardInterrupt itself is, see above). ``sigint_raises``:
    SIGINT is Python's default here even where this process inherited it ignored (a background job)."""
    import threading

    import gradcheck

    marker = tmp_path / "pid"
    monkeypatch.setenv("GRADCHECK_TEST_CHILD_PID", str(marker))
    slept, returned, lock = threading.Event(), threading.Event(), threading.Lock()

    def interrupt_when_sleeping():
        deadline = time.monotonic() + STARTS_WITHIN_S
        while not marker.exists() and not returned.is_set() and time.monotonic() < deadline:
            returned.wait(POLL_S)
        if marker.exists():
            slept.set()
        with lock:  # never after check() returned: a late SIGINT would end the whole pytest session
            if not returned.is_set():
                os.kill(os.getpid(), signal.SIGINT)  # at the deadline too: the sleep ends, and the test fails below

    before = signal.getsignal(signal.SIGINT)
    interrupter = threading.Thread(target=interrupt_when_sleeping, daemon=True)
    interrupter.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            gradcheck.check(ENDS, device="cpu", passes=2, settings={"action": "sleep"})
    finally:
        with lock:
            returned.set()
    interrupter.join(timeout=ENDS_WITHIN_S)
    assert not interrupter.is_alive() and slept.is_set(), "the scenario never started sleeping"
    assert signal.getsignal(signal.SIGINT) is before  # the caller's handler is back
