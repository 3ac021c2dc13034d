"""`gradcheck ci` and `run --timeout`: isolation (hang, segfault), JSON and JUnit complete and valid, baselines, shards."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import xmlschema
from conftest import SCENARIOS, TESTS, cli, cli_json

from gradcheck.model.exit_codes import ExitCode


def _project(tmp_path, scenarios: str):
    (tmp_path / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""\
            [tool.gradcheck]
            passes = 2
            fail-on = "error"
            scenarios = [
            {textwrap.indent(scenarios, "    ")}
            ]
            """
        )
    )
    return tmp_path


# --timeout for the scenarios that hang: each costs the whole timeout, so it is as short as the scenarios that must
# finish allow (retain_grad.py: ~2 s in a fresh worker with a cold kernel cache, ~0.1 s warm; SpinsInKernel's first
# pass compiles its kernels before the second pass spins)
HANGS_TIMEOUT_S = 8
SPINS_TIMEOUT_S = 10


@pytest.mark.parametrize(
    "hangs",
    [
        False,
        # the hang costs HANGS_TIMEOUT_S: the long lane; the fast one stops a hang in test_reliability.py (a
        # scenario's child process ended with it), through the same worker code as ci's
        pytest.param(True, marks=pytest.mark.slow),
    ],
    ids=["crash", "crash-and-hang"],
)
def test_crashing_and_hanging_scenarios_do_not_lose_the_others(tmp_path, hangs):
    misbehaving, retain = SCENARIOS / "misbehaving.py", SCENARIOS / "retain_grad.py"
    entries = [f'{{ spec = "{retain}" }}']
    entries += [f'{{ spec = "{misbehaving}:Hangs" }}'] if hangs else []
    entries += [f'{{ spec = "{misbehaving}:Segfaults" }}', f'{{ spec = "{retain}", fault = "no-zero" }}']
    _project(tmp_path, ",\n".join(entries) + ",")
    junit = tmp_path / "report.xml"
    timeout = str(HANGS_TIMEOUT_S)
    proc = cli("ci", "--format", "json", "--junit", str(junit), "--timeout", timeout, "--device", "cpu", cwd=tmp_path)
    assert proc.returncode == ExitCode.SCENARIO_ERROR, proc.stderr
    data = json.loads(proc.stdout)
    statuses = [s["status"] for s in data["scenarios"]]
    assert statuses == ["ok", *(["error"] if hangs else []), "error", "findings"]
    if hangs:
        assert f"timed out after {HANGS_TIMEOUT_S} s" in data["scenarios"][1]["error"]
    assert "killed by SIGSEGV" in data["scenarios"][-2]["error"]
    schema = xmlschema.XMLSchema(str(TESTS / "data" / "junit.xsd"))
    schema.validate(str(junit))
    xml = junit.read_text()
    assert xml.count("<testsuite ") == len(statuses) and xml.count("<error ") == statuses.count("error")
    assert '<failure message="1 finding(s)" type="accumulation">' in xml


def test_baseline_accepts_known_findings(tmp_path):
    _project(tmp_path, f'{{ spec = "{SCENARIOS / "retain_grad.py"}", fault = "params-only" }},')
    baseline = tmp_path / "baseline.json"
    update = cli("ci", "--baseline", str(baseline), "--update-baseline", "--device", "cpu", cwd=tmp_path)
    assert update.returncode == ExitCode.OK, update.stderr
    accepted = json.loads(baseline.read_text())["accepted"]
    assert [a["check"] for a in accepted] == ["accumulation"]  # the entry has a finding, which is now accepted
    again = cli("ci", "--baseline", str(baseline), "--device", "cpu", cwd=tmp_path)
    assert again.returncode == ExitCode.OK, again.stdout
    assert "(1 baselined)" in again.stdout


def test_shards_split_the_list(tmp_path):
    """Shard I of N takes entries I, I+N, ... of the list as configured (the split, in this process); the CLI runs
    its shard's entries and no other (one run), and refuses a shard outside 1..N."""
    from gradcheck.engine import ci as ci_run

    files = ["retain_grad.py", "struct_array.py", "struct_fields.py"]
    _project(tmp_path, "".join(f'"{SCENARIOS / name}", ' for name in files))
    entries = ci_run.load_config(tmp_path).entries
    assert ci_run.shard(entries, None) == entries
    assert [Path(e.spec).name for e in ci_run.shard(entries, "1/2")] == [files[0], files[2]]
    assert [Path(e.spec).name for e in ci_run.shard(entries, "2/2")] == [files[1]]
    two = json.loads(cli("ci", "--shard", "2/2", "--format", "json", "--device", "cpu", cwd=tmp_path).stdout)
    assert [s["name"] for s in two["scenarios"]] == ["struct-array"]
    bad = cli("ci", "--shard", "3/2", cwd=tmp_path)
    assert bad.returncode == ExitCode.USAGE and "--shard '3/2' must be I/N" in bad.stderr


@pytest.mark.slow
def test_default_list_is_every_builtin_clean_variant_and_passes(tmp_path):
    proc = cli("ci", "--format", "json", "--device", "cpu", cwd=tmp_path)
    assert proc.returncode == ExitCode.OK, proc.stdout[-3000:]
    data = json.loads(proc.stdout)
    assert {s["name"] for s in data["scenarios"]} == {
        "cartpole",
        "chains",
        "double-pendulum",
        "lights",
        "nested-struct",
        "rollout",
        "spring-chain",
        "tiles",
    }
    assert data["config"] == "built-in defaults"


@pytest.mark.slow  # the spinning kernel holds a core for the whole SPINS_TIMEOUT_S (~15 s in all)
def test_run_timeout_stops_a_native_hang_and_a_crash_and_reports_the_rest():
    """`run --timeout`: a Warp kernel that never returns is stopped, a segfault is survived, and the
    scenario after them still runs in a fresh worker; stdout stays one valid JSON report."""
    misbehaving, passes = SCENARIOS / "misbehaving.py", 3
    proc, data = cli_json(
        "run",
        f"{misbehaving}:SpinsInKernel",
        f"{misbehaving}:Segfaults",
        str(SCENARIOS / "factory.py"),
        "--timeout", str(SPINS_TIMEOUT_S), "--passes", str(passes), "--device", "cpu", "--fd", "off", "--no-replay",
    )  # fmt: skip
    assert proc.returncode == ExitCode.SCENARIO_ERROR, proc.stderr
    spins, segfaults, linear = data["scenarios"]
    assert spins["status"] == "error"
    assert f"timed out after {SPINS_TIMEOUT_S} s (--timeout) during pass 2 of {passes}" in spins["error"]
    assert segfaults["status"] == "error" and "killed by SIGSEGV" in segfaults["error"]
    assert linear["status"] == "ok" and linear["passes"] == passes
    linear_grad_norm = (1 + 4 + 9 + 16) ** 0.5  # factory.py's linear loss: its gradient is [1, 2, 3, 4]
    assert linear["params"][0]["norms"] == pytest.approx([linear_grad_norm] * passes)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("gradcheck: error:")]
    assert len(errors) == len([spins, segfaults]) and "Traceback" not in proc.stderr
    assert data["environment"]["warp"]  # versions come from the worker


def test_run_timeout_gives_the_same_report_as_in_process():
    """Isolation changes where a scenario runs, not what is found."""
    args = ("run", "nested-struct", "--fault", "grad-replaced", "--passes", "3", "--device", "cpu")
    _, inline = cli_json(*args)
    _, isolated = cli_json(*args, "--timeout", "300")

    def essence(report):  # what was found; not timings or the process's pointer values
        (s,) = report["scenarios"]
        return (
            s["status"],
            s["losses"],
            s["fd"],
            [(p["subject"], p["norms"], p["verdict"]) for p in s["params"]],
            [(f["check"], f["severity"], f["subject"]) for f in s["findings"]],
        )

    assert essence(isolated) == essence(inline)
    assert {f["check"] for f in inline["scenarios"][0]["findings"]} >= {"stale-adjoint", "fd-mismatch"}
    assert isolated["exit_code"] == inline["exit_code"] == ExitCode.FINDINGS


def test_run_timeout_must_be_positive():
    proc, data = cli_json("run", "cartpole", "--timeout", "0", "--device", "cpu")
    assert proc.returncode == ExitCode.USAGE
    assert "--timeout must be a positive number of seconds" in proc.stderr
    assert data["error"].startswith("--timeout")


def test_baselines_and_junit_work_on_the_report_model():
    """Baselines mark Findings, the exit code follows them, JUnit renders the Report: no JSON round trip."""
    import pickle
    from dataclasses import replace

    from gradcheck.formats import junit
    from gradcheck.model.baseline import Baseline
    from gradcheck.model.findings import Finding, Severity
    from gradcheck.model.report import Report, ScenarioResult

    leak = Finding("accumulation", Severity.ERROR, "x.grad", "grows 1x per pass", "zero it")
    note = Finding("zero-audit", Severity.WARNING, "y.grad", "nonzero after tape.zero()", "zero it")
    result = ScenarioResult(spec="s.py", name="s", findings=(leak, note), label="s.py --fault no-zero")
    report = Report(environment={}, scenarios=(result,), fail_on=Severity.ERROR)
    assert report.exit_code == ExitCode.FINDINGS
    checked = replace(report, checks=("accumulation",))
    assert '<failure message="1 finding(s)" type="accumulation">' in junit.render(checked)

    baseline = Baseline.of(report)  # what fails now: the error, not the warning
    assert baseline.accepted == {("s.py --fault no-zero", "accumulation", "x.grad")}
    accepted = baseline.apply(report)
    assert [f.baselined for f in accepted.scenarios[0].findings] == [True, False]
    assert accepted.exit_code == ExitCode.OK
    assert "<failure" not in junit.render(replace(accepted, checks=("accumulation", "zero-audit")))
    scenario = accepted.scenarios[0].to_dict()
    assert scenario["label"] == "s.py --fault no-zero" and scenario["findings"][0]["baselined"] is True
    assert pickle.loads(pickle.dumps(accepted.scenarios[0].findings[0])).baselined is True  # crosses the worker pipe
    assert "baselined" not in result.to_dict()["findings"][0]  # no baseline, no key: `run` JSON unchanged

    other = Baseline(frozenset({("another scenario", "accumulation", "x.grad")}))
    assert other.apply(report).exit_code == ExitCode.FINDINGS  # the scenario label is part of the key
