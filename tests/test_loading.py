"""Scenario specs: file path, file.py:Name, pkg.mod:Name, entry points; and what bad specs say."""

from __future__ import annotations

import sys
import textwrap

import pytest
from conftest import ROOT, SCENARIOS, cli, cli_in_process, cli_json, run_scenario

from gradcheck.model.errors import UsageError
from gradcheck.model.exit_codes import ExitCode
from gradcheck.scenario.resolve import resolve

FACTORY = SCENARIOS / "factory.py"


@pytest.mark.parametrize(
    ("spec", "name"),
    [
        (str(FACTORY), "linear"),
        (f"{FACTORY}:Linear", "linear"),
        (f"{FACTORY}:make_linear", "from-factory"),
        (f"{FACTORY}:instance", "from-instance"),
    ],
)
def test_file_specs_load_instances_classes_and_factories(spec, name):
    result, _ = run_scenario(spec, passes=2)
    assert result.error is None, result.error
    assert result.name == name
    (param,) = result.params
    assert param.norms == (pytest.approx(30.0**0.5),) * 2  # grad = [1, 2, 3, 4]
    assert result.findings == ()


def test_module_attr_spec(monkeypatch):
    monkeypatch.syspath_prepend(str(SCENARIOS))
    ref = resolve("factory:make_linear")
    assert (ref.kind, ref.target, ref.attr) == ("module", "factory", "make_linear")
    result, _ = run_scenario("factory:make_linear", passes=1)
    assert result.error is None and result.name == "from-factory"


def test_builtin_resolves_to_installed_package():
    ref = resolve("cartpole")
    assert (ref.kind, ref.target, ref.attr) == ("built-in", "gradcheck.scenarios.cartpole", "scenario")


def _entry_point_dist(tmp_path):
    """A real installed distribution (dist-info on sys.path) declaring a gradcheck.scenarios entry point."""
    site = tmp_path / "site"
    (site / "demo_gc_pkg").mkdir(parents=True)
    (site / "demo_gc_pkg" / "__init__.py").write_text("")
    (site / "demo_gc_pkg" / "scen.py").write_text(FACTORY.read_text())
    info = site / "demo_gc-0.1.dist-info"
    info.mkdir()
    info.joinpath("METADATA").write_text("Metadata-Version: 2.1\nName: demo-gc\nVersion: 0.1\n")
    info.joinpath("entry_points.txt").write_text(
        textwrap.dedent(
            """\
            [gradcheck.scenarios]
            demo-linear = demo_gc_pkg.scen:make_linear
            """
        )
    )
    return site


def test_entry_point_scenario_is_listed_and_runs(tmp_path):
    site = _entry_point_dist(tmp_path)
    env = {"PYTHONPATH": str(site)}
    proc = cli("list", "--format", "json", env=env)
    assert proc.returncode == 0, proc.stderr
    import json

    listed = {s["name"]: s for s in json.loads(proc.stdout)}
    assert listed["demo-linear"]["source"] == "entry point (demo-gc)"
    assert listed["demo-linear"]["description"] == "loss = sum((i+1) * x[i])"
    assert "cartpole" in listed

    proc, data = cli_json("run", "demo-linear", "--passes", "2", "--device", "cpu", env=env)
    assert proc.returncode == 0, proc.stderr
    assert data["scenarios"][0]["name"] == "from-factory"
    assert data["scenarios"][0]["status"] == "ok"


def test_unknown_scenario_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown scenario 'nope'.*cartpole"):
        resolve("nope")


IN_A_PROCESS = {"unknown scenario 'nope'", "SyntaxError"}


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["run", "nope"], ExitCode.USAGE, "unknown scenario 'nope'"),
        (["run", "cartpole", "--set", "steps"], ExitCode.USAGE, "malformed --set 'steps'"),
        # the same usage errors that test_usage_errors.py and test_options.py prove in-process: a process each here
        *[
            pytest.param(*case, marks=pytest.mark.slow)
            for case in (
                (["run", "missing_file.py"], ExitCode.USAGE, "does not exist"),
                (
                    ["run", "cartpole", "--fault", "bogus"],
                    ExitCode.USAGE,
                    "unknown fault 'bogus' for scenario 'cartpole'",
                ),
                (["run", "cartpole", "--set", "stpes=3"], ExitCode.USAGE, "unknown option --set stpes"),
                (["run", "cartpole", "--passes", "0"], ExitCode.USAGE, "--passes must be at least 1"),
            )
        ],
        (["run", str(SCENARIOS / "broken_syntax.py")], ExitCode.SCENARIO_ERROR, "SyntaxError"),
        (
            ["run", str(SCENARIOS / "raises_on_import.py")],
            ExitCode.SCENARIO_ERROR,
            "ImportError at line 5: this scenario needs the package 'not_installed_pkg'",
        ),
        (["run", str(SCENARIOS / "no_scenario.py")], ExitCode.SCENARIO_ERROR, "defines no 'scenario'"),
        (["run", str(SCENARIOS / "raises.py")], ExitCode.SCENARIO_ERROR, "setup() raised RuntimeError"),
        (["run", str(SCENARIOS / "raises.py"), "--set", "phase=forward"], ExitCode.SCENARIO_ERROR, "forward() raised"),
        (["run", str(SCENARIOS / "raises.py"), "--set", "phase=vector-loss"], ExitCode.SCENARIO_ERROR, "shape (3,)"),
        (
            ["run", str(SCENARIOS / "raises.py"), "--set", "phase=no-grad"],
            ExitCode.SCENARIO_ERROR,
            "requires_grad=False",
        ),
    ],
)
def test_bad_input_gives_one_line_and_exit_code(args, code, needle):
    device = [] if "--device" in args else ["--device", "cpu"]
    in_a_process = needle in IN_A_PROCESS  # one usage error and one scenario error as a user's shell sees them
    proc = (cli if in_a_process else cli_in_process)(*args, *device, "--format", "json")
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("gradcheck: error:")]
    assert len(errors) == 1, proc.stderr
    assert needle in errors[0]
    assert "Traceback" not in proc.stderr
    import json

    assert json.loads(proc.stdout)["exit_code"] == code  # stdout stays a valid report


def test_all_nan_gradients_are_a_finding_not_a_crash():
    proc, data = cli_json(
        "run", str(SCENARIOS / "raises.py"), "--set", "phase=all-nan", "--passes", "2", "--device", "cpu"
    )
    assert proc.returncode == ExitCode.FINDINGS, proc.stderr
    (scenario,) = data["scenarios"]
    assert scenario["status"] == "findings" and scenario["error"] is None
    assert {f["check"] for f in scenario["findings"]} == {"nonfinite"}  # not also "missing"


def test_debug_shows_the_traceback():
    proc = cli("run", str(SCENARIOS / "raises.py"), "--device", "cpu", "--debug")
    assert proc.returncode == ExitCode.SCENARIO_ERROR
    assert "Traceback" in proc.stderr and "setup failed on purpose" in proc.stderr


def test_failing_scenario_does_not_lose_the_others():
    proc, data = cli_json("run", str(FACTORY), str(SCENARIOS / "raises.py"), "--passes", "2", "--device", "cpu")
    assert proc.returncode == ExitCode.SCENARIO_ERROR
    statuses = [s["status"] for s in data["scenarios"]]
    assert statuses == ["ok", "error"]
    assert data["scenarios"][1]["error"].startswith("raises: setup() raised RuntimeError")


@pytest.mark.slow  # builds and installs a wheel (~12 s, 40 s beside another worker); test_layout checks the package list fast
def test_builtin_scenarios_run_from_a_non_editable_install(tmp_path):
    """`pip install .` (not editable) must ship the built-in scenarios; run from another directory."""
    import subprocess

    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        cwd=str(tmp_path),
        timeout=300,
    )
    assert (target / "gradcheck" / "scenarios" / "cartpole.py").is_file()
    env = {"PYTHONPATH": str(target)}
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    proc = cli("list", "--format", "json", env=env, cwd=workdir)
    assert proc.returncode == 0 and '"cartpole"' in proc.stdout
    proc, data = cli_json(
        "run", "cartpole", "--set", "steps=3", "--passes", "2", "--device", "cpu", env=env, cwd=workdir
    )
    assert proc.returncode == 0, proc.stderr
    assert data["scenarios"][0]["error"] is None
    where = subprocess.run(  # where the module is found, without importing it (and Newton with it)
        [sys.executable, "-c", "import importlib.util as u; print(u.find_spec('gradcheck.scenarios.cartpole').origin)"],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, **env},
        cwd=workdir,
        check=True,
        timeout=60,
    )
    assert where.stdout.strip().startswith(str(target))  # the installed copy ran, not the checkout
