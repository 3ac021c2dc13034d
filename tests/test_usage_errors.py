"""Usage errors come before anything runs, as one line and exit 2 (issue 28, item 4).

(a) every spec of a command is resolved, loaded and checked (fault, --set keys) before any scenario's setup() runs;
(b) a --set value a scenario's setup() rejects (ValueError/TypeError) is a usage error naming the option, and every
built-in scenario checks its own values; (c) a directory where a .py file belongs is named as one; (d) an unusable
Warp kernel cache is one line naming the path and the fix; (e) a --cuda-arch NVRTC cannot compile for is named.

Most commands run in-process through Typer's CliRunner (Warp is initialised once for the session); the kernel-cache
commands need a fresh process each, and start together.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT, invoke

from gradcheck.model.exit_codes import ExitCode

MARKED = """
import os

import warp as wp

RAN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "setup-ran")


@wp.kernel(module="unique")  # named by its code, not by this file's folder: compiled once for every copy
def total(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, x[wp.tid()])


class Marked:
    name = "marked"
    faults = {"f1": "a fault only this scenario knows"}

    def setup(self, device, fault=None, n="2"{extra}):
        with open(RAN, "a") as handle:  # the proof that setup() ran
            handle.write("setup\\n")
        {body}
        self.x = wp.ones(2, dtype=float, device=device, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)

    def params(self):
        return {"x": self.x}

    def forward(self):
        self.loss.zero_()
        wp.launch(total, dim=2, inputs=[self.x], outputs=[self.loss])
        return self.loss


scenario = Marked
"""


def _scenario(folder, name: str = "marked.py", extra: str = "", body: str = "pass"):
    path = folder / name
    path.write_text(MARKED.replace("{extra}", extra).replace("{body}", body))
    return path


def assert_usage(result, *needles: str) -> str:
    """Exit 2, one `gradcheck: error:` line holding every needle, no traceback; returns the line."""
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == ExitCode.USAGE, (result.exit_code, result.stderr[-2000:])
    lines = [line for line in result.stderr.splitlines() if line.startswith("gradcheck: error:")]
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert "Traceback" not in result.stderr + result.stdout
    return lines[0]


# -- (a) every spec checked before any setup() -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "needle"),
    [
        (["run", "{marked}", "nosuch"], "unknown scenario 'nosuch'"),
        (["run", "{marked}", "rollout", "--fault", "f1"], "unknown fault 'f1' for scenario 'rollout'"),
        (["run", "{marked}", "rollout", "--set", "n=3"], "unknown option --set n=… for scenario 'rollout'"),
        (["blame", "{marked}", "nosuch"], "unknown scenario 'nosuch'"),
        (["run", "{marked}", "{missing}"], "does not exist"),
        # through worker processes (--timeout): a process start each, the long lane's
        pytest.param(
            ["run", "{marked}", "nosuch", "--timeout", "120"], "unknown scenario 'nosuch'", marks=pytest.mark.slow
        ),
        pytest.param(
            ["run", "{marked}", "rollout", "--fault", "f1", "--timeout", "120"],
            "unknown fault 'f1'",
            marks=pytest.mark.slow,
        ),
        (["sweep", "{marked}", "--set", "n=1,2", "--fault", "nope"], "unknown fault 'nope' for scenario 'marked'"),
        (["sweep", "{marked}", "--set", "n=1,2", "--set", "steps=3"], "unknown option --set steps=…"),
        (["sweep", "{marked}", "--set", "n=1,2", "--set", "n=3"], "--set n is given twice (n=1,2, then n=3)"),
    ],
)
def test_every_spec_is_checked_before_any_scenario_sets_up(tmp_path, command, needle):
    marked = _scenario(tmp_path)
    args = [a.format(marked=marked, missing=tmp_path / "missing.py") for a in command]
    assert_usage(invoke(*args, "--device", "cpu"), needle)
    assert not (tmp_path / "setup-ran").exists(), "a scenario's setup() ran before the usage error"


def test_ci_checks_every_entry_before_the_first_runs(tmp_path, monkeypatch):
    marked = _scenario(tmp_path)
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.gradcheck]\npasses = 1\nscenarios = ["{marked.name}", {{ spec = "{marked.name}", fault = "nope" }}]\n'
    )
    monkeypatch.chdir(tmp_path)
    assert_usage(invoke("ci", "--device", "cpu"), "scenarios[1] (marked.py --fault nope)", "unknown fault 'nope'")
    assert not (tmp_path / "setup-ran").exists()


# -- (b) --set values: the scenario's to check, a usage error when it rejects one -------------------------------


def _builtin_options() -> list[tuple[str, str, str]]:
    """(scenario, option, bad value) for every option every built-in scenario's setup() takes: numbers get
    negative, zero, non-numeric and (whole numbers) fractional values; anything else gets a value no choice has."""
    from gradcheck.scenario import loader

    cases = []
    for spec in _builtin_names():
        scenario, _ = loader.checked(spec)
        for key, parameter in inspect.signature(scenario.setup).parameters.items():
            if key in ("device", "fault") or parameter.default is inspect.Parameter.empty:
                continue
            default = str(parameter.default)
            if default.isdigit():
                bad = ("-3", "0", "abc", "1.5", "")
            elif _is_float(default):
                bad = ("-0.1", "0", "abc", "nan", "inf")
            else:
                bad = ("no-such-choice",)
            cases += [(spec, key, value) for value in bad]
    return cases


def _builtin_names() -> list[str]:
    from gradcheck.scenario.catalog import builtin_infos

    return [info.name for info in builtin_infos()]


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


BUILTIN_OPTIONS = _builtin_options()


def test_the_builtin_options_are_all_covered():
    """The parametrisation is not vacuous: the built-ins' known options are in it."""
    covered = {(spec, key) for spec, key, _ in BUILTIN_OPTIONS}
    assert {("cartpole", "steps"), ("cartpole", "scratch"), ("rollout", "steps"), ("rollout", "dt")} <= covered
    assert ("double-pendulum", "steps") in covered


@pytest.mark.parametrize(("spec", "key", "value"), BUILTIN_OPTIONS)
def test_every_builtin_rejects_a_bad_option_value_as_a_usage_error(spec, key, value):
    result = invoke("run", spec, "--set", f"{key}={value}", "--device", "cpu", "--passes", "1", "--format", "json")
    line = assert_usage(result, f"{spec}: setup() rejected --set {key}={value}: {key} must be")
    assert len(line) < 400
    (scenario,) = json.loads(result.stdout)["scenarios"]
    assert f"{key} must be" in scenario["error"]


def test_a_rejected_value_keeps_the_other_scenarios_results(tmp_path):
    """A usage error from one scenario's setup() is that scenario's result: the others still run and are reported,
    and the run exits 2."""
    tolerant = _scenario(tmp_path, "tolerant.py", extra=", **options")
    result = invoke(
        "run", "rollout", str(tolerant), "--set", "steps=0", "--device", "cpu", "--passes", "1",
        "--fd", "off", "--no-replay", "--blame", "off", "--format", "json",
    )  # fmt: skip
    assert_usage(result, "rollout: setup() rejected --set steps=0: steps must be a whole number of at least 1")
    rollout, marked = json.loads(result.stdout)["scenarios"]
    assert "steps must be" in rollout["error"]
    assert marked["name"] == "marked" and marked.get("error") is None and marked["params"]


@pytest.mark.parametrize("error", ["ValueError", "TypeError"])
def test_setup_raising_without_set_is_the_scenarios_error_and_with_set_the_users(tmp_path, error):
    broken = _scenario(tmp_path, body=f"raise {error}('n must be even, got ' + repr(n))")
    without = invoke("run", str(broken), "--device", "cpu", "--passes", "1")
    assert without.exit_code == ExitCode.SCENARIO_ERROR, without.stderr
    assert f"setup() raised {error}" in without.stderr and "Traceback" not in without.stderr
    given = invoke("run", str(broken), "--set", "n=3", "--device", "cpu", "--passes", "1")
    assert_usage(given, "marked: setup() rejected --set n=3: n must be even, got '3'")


# -- (c) a directory where a .py file belongs --------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["run", "{dir}/"],
        ["run", "{dir}"],
        ["run", "{dir}:Name"],
        ["run", "rollout", "{dir}/:Name"],
        ["blame", "{dir}/"],
        ["sweep", "{dir}/", "--set", "n=1,2"],
    ],
)
def test_a_directory_for_a_scenario_file_is_named_as_one(tmp_path, monkeypatch, command):
    (tmp_path / "some_dir").mkdir()
    (tmp_path / "some_dir" / "inside.py").write_text("")
    monkeypatch.chdir(tmp_path)
    args = [a.format(dir="some_dir") for a in command]
    assert_usage(invoke(*args, "--device", "cpu"), "'some_dir", "is a directory; give a .py file", "inside.py")


def test_ci_names_a_directory_entry(tmp_path, monkeypatch):
    (tmp_path / "some_dir").mkdir()
    (tmp_path / "pyproject.toml").write_text('[tool.gradcheck]\nscenarios = ["some_dir/"]\n')
    monkeypatch.chdir(tmp_path)
    assert_usage(invoke("ci", "--device", "cpu"), "scenarios[0]", "is a directory; give a .py file")


def test_exec_names_a_directory(tmp_path, monkeypatch):
    (tmp_path / "some_dir").mkdir()
    monkeypatch.chdir(tmp_path)
    assert_usage(invoke("exec", "some_dir/"), "'some_dir/' is a directory", "give a .py file")


def test_the_exec_directory_check_the_cli_is_to_call(tmp_path):
    from gradcheck.engine.program_files import check_script
    from gradcheck.model.errors import UsageError

    (tmp_path / "some_dir").mkdir()
    with pytest.raises(UsageError, match="'.*some_dir' is a directory without __main__.py; give a .py file"):
        check_script(str(tmp_path / "some_dir"))
    with pytest.raises(UsageError, match="no such script"):
        check_script(str(tmp_path / "missing.py"))
    (tmp_path / "some_dir" / "__main__.py").write_text("")
    check_script(str(tmp_path / "some_dir"))  # a folder python can run


# -- (d) an unusable kernel cache: one line before anything runs --------------------------------------------------

CACHE_COMMANDS = {
    "run": ["run", "rollout", "--device", "cpu"],
    "blame": ["blame", "rollout", "--device", "cpu"],
    "sweep": ["sweep", "rollout", "--set", "steps=1,2", "--device", "cpu"],
    "ci": ["ci", "--device", "cpu"],
    "doctor": ["doctor"],
    "selftest": ["selftest", "--device", "cpu"],
}
WARP_PROGRAM = """
import warp as wp

@wp.kernel
def k(a: wp.array(dtype=float)):
    a[0] = 1.0

a = wp.zeros(1, dtype=float, requires_grad=True)
wp.launch(k, dim=1, inputs=[a])
"""


def assert_cache_line(line: str, path: str, env: str) -> None:
    assert f"Warp's kernel cache '{path}" in line, line
    assert f"point WARP_CACHE_PATH (now '{env}') at a writable directory" in line, line


@pytest.mark.parametrize("command", list(CACHE_COMMANDS))
def test_every_command_checks_the_kernel_cache_before_anything_runs(tmp_path, monkeypatch, command):
    """In-process, where Warp is already initialised: the cache Warp resolved is a path below a file, as
    WARP_CACHE_PATH=FILE makes it; every command says so in one line before it runs anything."""
    import warp as wp

    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setattr(wp.config, "kernel_cache_dir", str(blocked / wp.config.version))
    monkeypatch.setenv("WARP_CACHE_PATH", str(blocked))
    monkeypatch.chdir(tmp_path)  # ci: no [tool.gradcheck] here, so every built-in
    line = assert_usage(invoke(*CACHE_COMMANDS[command]), "cannot be used: Not a directory")
    assert_cache_line(line, str(blocked / wp.config.version), str(blocked))


@pytest.fixture(scope="module")
def fresh_processes(tmp_path_factory):
    """A fresh gradcheck per case, where Warp's own initialisation meets WARP_CACHE_PATH, started together:
    {case: (the WARP_CACHE_PATH, the finished process)}."""
    folder = tmp_path_factory.mktemp("cache")
    a_file = folder / "a-file"
    a_file.write_text("not a folder")
    (folder / "program.py").write_text(WARP_PROGRAM)
    cases = {
        "run": ("/proc/gradcheck-nope", CACHE_COMMANDS["run"]),
        "doctor": (str(a_file), CACHE_COMMANDS["doctor"]),
        "exec": ("/proc/gradcheck-nope", ["exec", str(folder / "program.py")]),
    }
    started = {}
    for case, (cache, args) in cases.items():
        env = {**os.environ, "WARP_CACHE_PATH": cache}
        env.pop("FORCE_COLOR", None)
        started[case] = cache, subprocess.Popen(
            [sys.executable, "-m", "gradcheck", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL, text=True, env=env, cwd=str(folder),
        )  # fmt: skip
    done = {}
    for case, (cache, proc) in started.items():
        out, err = proc.communicate(timeout=300)
        done[case] = cache, subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return done


@pytest.mark.parametrize("case", ["run", "doctor"])
def test_an_unusable_warp_cache_path_is_one_line_and_exit_2(fresh_processes, case):
    """WARP_CACHE_PATH where no folder can be made, and naming a file: Warp's initialisation fails, and the
    command says why in one line instead of a traceback."""
    cache, proc = fresh_processes[case]
    assert proc.returncode == ExitCode.USAGE, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("gradcheck: error:")]
    assert len(lines) == 1, proc.stderr
    assert_cache_line(lines[0], cache, cache)
    assert "Traceback" not in proc.stderr + proc.stdout and "╭" not in proc.stderr


def test_under_exec_an_unusable_cache_is_the_programs_failure(fresh_processes):
    """gradcheck never initialises Warp around a program: the program meets the cache first and fails as under
    python (its own traceback, Warp's frames only), exit 3; gradcheck's line names the cache and the fix."""
    cache, proc = fresh_processes["exec"]
    assert proc.returncode == ExitCode.SCENARIO_ERROR, proc.stderr[-2000:]
    line = [line for line in proc.stderr.splitlines() if line.startswith("gradcheck: error:")][-1]
    assert "the program exited with status 1: FileNotFoundError" in line
    assert_cache_line(line, cache, cache)
    program = proc.stderr[: proc.stderr.index("gradcheck: error:")]
    assert program.rstrip().endswith(f"FileNotFoundError: [Errno 2] No such file or directory: '{cache}'")
    assert "gradcheck" + os.sep not in program  # the program's traceback, none of gradcheck's frames


def test_a_read_only_kernel_cache_is_a_usage_error(tmp_path):
    import warp as wp

    cache = tmp_path / "read-only"
    versioned = cache / wp.config.version
    versioned.mkdir(parents=True)
    os.chmod(versioned, 0o555)
    os.chmod(cache, 0o555)
    try:
        if os.access(versioned, os.W_OK):
            pytest.skip("permissions do not bind this user (root): a read-only folder is writable to it")
        proc = subprocess.run(
            [sys.executable, "-m", "gradcheck", "run", "rollout", "--device", "cpu"], capture_output=True, text=True,
            env={**os.environ, "WARP_CACHE_PATH": str(cache)}, cwd=str(ROOT), timeout=300, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    finally:
        os.chmod(cache, 0o755)
        os.chmod(versioned, 0o755)
    assert proc.returncode == ExitCode.USAGE, proc.stderr[-2000:]
    assert "Permission denied" in proc.stderr and "Traceback" not in proc.stderr


def test_the_cache_check_reads_warps_own_path(tmp_path, monkeypatch):
    """In-process (Warp already initialised): the check writes into wp.config.kernel_cache_dir and says why not."""
    import warp as wp

    from gradcheck.engine import environment

    assert environment.kernel_cache_problem() is None  # this session's cache is fine
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setattr(wp.config, "kernel_cache_dir", str(blocked / "1.0"))
    monkeypatch.delenv("WARP_CACHE_PATH", raising=False)
    problem = environment.kernel_cache_problem()
    assert problem is not None and str(blocked / "1.0") in problem and "Not a directory" in problem
    assert "set WARP_CACHE_PATH to a writable directory" in problem


# -- (e) an architecture NVRTC cannot compile for -----------------------------------------------------------------


def test_doctor_names_an_unsupported_cuda_arch():
    import warp as wp

    supported = wp.get_cuda_supported_archs() if hasattr(wp, "get_cuda_supported_archs") else []
    if not supported or 85 in supported:
        pytest.skip("this Warp cannot list NVRTC's architectures, or it compiles for sm_85")
    result = invoke("doctor", "--cuda-arch", "80,85")
    line = assert_usage(result, "--cuda-arch", "cannot compile for sm_85", "it supports", "80,")
    assert "sm_80" not in line  # only the unsupported one is named
    assert ",".join(str(a) for a in supported) in line


def test_the_readme_states_the_rule():
    text = (ROOT / "docs" / "scenarios.md").read_text(encoding="utf-8")
    section = text[text.index("## The scenario contract") :] + "\n## "
    section = " ".join(section[: section.index("\n## ", 3)].split())
    assert "ValueError" in section and "exit 2" in section and "exit 3" in section
    assert "before any scenario's `setup()` runs" in section


def test_a_setup_bug_that_names_no_option_stays_the_scenarios_error(tmp_path):
    """A TypeError in setup() is the user's input only when it names a --set option (its key or value):
    ``fault + 1`` on None, with --set given, is still the scenario's bug (exit 3)."""
    path = tmp_path / "buggy.py"
    path.write_text(
        "class S:\n"
        "    name = 'buggy'\n"
        "    def setup(self, device, fault=None, n='3'):\n"
        "        if int(n) < 1:\n"
        "            raise ValueError(f'n must be at least 1, got {n!r}')\n"
        "        fault + 1\n"
        "    def params(self):\n"
        "        return {}\n"
        "    def forward(self):\n"
        "        return None\n"
        "scenario = S\n"
    )
    bug = invoke("run", str(path), "--set", "n=3", "--passes", "1", "--device", "cpu")
    assert bug.exit_code == ExitCode.SCENARIO_ERROR, bug.stderr
    assert_usage(
        invoke("run", str(path), "--set", "n=0", "--passes", "1", "--device", "cpu"), "setup() rejected --set n=0"
    )


def test_a_sweep_value_setup_rejects_keeps_the_rows_before_it():
    """steps=5,0: 0 is the user's mistake (exit 2, one line), and the row computed for 5 is still reported."""
    result = invoke("sweep", "rollout", "--set", "steps=5,0", "--format", "json", "--device", "cpu")
    assert_usage(result, "setup() rejected --set steps=0")
    rows = json.loads(result.stdout)["rows"]
    assert [(r["value"], r["verdict"]) for r in rows] == [("5", "ok"), ("0", "rejected")]
