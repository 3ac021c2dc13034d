"""The CLI surface: --version, list without Warp, JSON on stdout from a cold cache, --output."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import SCENARIOS, cli, cli_in_process, cli_json

from gradcheck import __version__
from gradcheck.formats import RENDERERS, OutputFormat
from gradcheck.model.exit_codes import ExitCode, combine
from gradcheck.model.findings import Finding, Severity
from gradcheck.model.report import ScenarioResult


def test_version():
    proc = cli("--version")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"gradcheck {__version__}"


def test_list_imports_neither_warp_nor_newton():
    code = (
        "import sys, json\n"
        "from typer.testing import CliRunner\n"
        "from gradcheck.cli import app\n"
        "out = CliRunner().invoke(app, ['list', '--format', 'json'])\n"
        "assert out.exit_code == 0, out.output\n"
        "data = json.loads(out.stdout)\n"
        "print(json.dumps({'names': [d['name'] for d in data], "
        "'heavy': [m for m in ('warp', 'newton', 'numpy') if m in sys.modules], 'first': data[0]}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    result = json.loads(proc.stdout)
    assert result["heavy"] == []
    assert "cartpole" in result["names"]
    cartpole = result["first"]
    assert set(cartpole) == {"name", "description", "faults", "source"}
    assert set(cartpole["faults"]) == {"no-zero", "zero-before-backward", "state-in-tape"}
    assert cartpole["source"] == "built-in"


def test_list_table():
    proc = cli("list")
    assert proc.returncode == 0
    assert "cartpole" in proc.stdout and "--fault no-zero" in proc.stdout


@pytest.mark.slow
def test_json_stdout_is_clean_from_a_cold_kernel_cache(tmp_path):
    """Warp prints 'Module ... load' lines when it compiles; none may reach stdout."""
    env = {"WARP_CACHE_PATH": str(tmp_path / "cold-cache")}
    proc, data = cli_json("run", "cartpole", "--set", "steps=3", "--passes", "2", "--device", "cpu", env=env)
    assert proc.returncode == 0, proc.stderr
    assert data["schema"] == "gradcheck/1"
    assert data["environment"]["device"] == "cpu"
    assert data["environment"]["warp"] and data["environment"]["newton"]
    assert any((tmp_path / "cold-cache").iterdir()), "the run did not use the cold cache"
    (scenario,) = data["scenarios"]
    expected = {"name", "fault", "device", "options", "status", "error", "params", "findings"}
    assert expected <= set(scenario)
    assert scenario["options"] == {"steps": "3"}


def test_output_file_and_table_default(tmp_path):
    out = tmp_path / "report.json"
    args = ["run", str(SCENARIOS / "retain_grad.py"), "--fault", "no-zero", "--device", "cpu"]
    proc = cli(*args, "--format", "json", "--output", str(out))
    assert proc.returncode == ExitCode.FINDINGS
    assert proc.stdout == ""
    data = json.loads(out.read_text())
    assert {f["check"] for f in data["scenarios"][0]["findings"]} == {"accumulation", "zero-audit"}
    finding = data["scenarios"][0]["findings"][0]
    assert set(finding) == {"check", "severity", "subject", "message", "hint", "evidence", "explain"}

    proc = cli(*args)
    assert proc.returncode == ExitCode.FINDINGS
    assert "accumulation" in proc.stdout and "x.grad" in proc.stdout
    assert "exit 1" in proc.stdout


def test_fail_on_decides_whether_warnings_fail():
    warning = Finding("zero-audit", Severity.WARNING, "y.grad", "nonzero after tape.zero()", "zero it")
    result = ScenarioResult(spec="s", name="s", findings=(warning,))
    assert result.exit_code(Severity.ERROR) == ExitCode.OK
    assert result.exit_code(Severity.WARNING) == ExitCode.FINDINGS
    assert result.status == "findings"


def test_fail_on_reaches_the_report():
    """A scenario whose only finding is a warning: exit 0 by default, 1 with --fail-on warning."""
    args = ["run", "spring-chain", "--fault", "unit-mismatch", "--passes", "3", "--device", "cpu", "--format", "json"]
    default = cli(*args)
    assert default.returncode == ExitCode.OK, default.stderr
    severities = {(f["check"], f["severity"]) for f in json.loads(default.stdout)["scenarios"][0]["findings"]}
    assert severities == {("vanishing", "warning")}
    strict = cli_in_process(*args, "--fail-on", "warning")  # the same run: only the verdict differs
    assert strict.returncode == ExitCode.FINDINGS
    data = json.loads(strict.stdout)
    assert data["fail_on"] == "warning" and data["exit_code"] == ExitCode.FINDINGS


def test_unwritable_output_is_a_usage_error(tmp_path):
    proc = cli("run", "cartpole", "--output", str(tmp_path / "no" / "such" / "dir" / "r.json"))
    assert proc.returncode == ExitCode.USAGE
    assert proc.stderr.strip().splitlines()[-1].startswith("gradcheck: error: cannot write --output")


def test_every_document_renders_as_table_and_json():
    """Every command's document has both human and machine formats; JUnit only where results are pass/fail."""
    for kind, renderers in RENDERERS.items():
        assert {OutputFormat.table, OutputFormat.json} <= set(renderers), kind
    assert {k for k, r in RENDERERS.items() if OutputFormat.junit in r} == {"report", "ci", "selftest"}


def test_exit_code_priority():
    assert combine([]) == ExitCode.OK
    assert combine([ExitCode.OK, ExitCode.FINDINGS]) == ExitCode.FINDINGS
    assert combine([ExitCode.FINDINGS, ExitCode.SCENARIO_ERROR]) == ExitCode.SCENARIO_ERROR
    assert combine([ExitCode.SCENARIO_ERROR, ExitCode.USAGE]) == ExitCode.USAGE


def test_exec_reads_a_plain_command_line_itself_and_leaves_the_rest_to_typer():
    """gradcheck exec skips Typer's parse (a pydantic adapter per option, ~0.1 s of every run) when the command line
    is a plain one; the options come from exec_program's own declarations, and anything unsure goes to Typer."""
    from pathlib import Path

    from gradcheck.cli.exec_fast import _options, _parse
    from gradcheck.cli.exec_program import exec_program
    from gradcheck.formats import OutputFormat
    from gradcheck.model.options import AUDIT_FIRST, FailOn

    options = _options(exec_program)
    values = _parse(["--format", "json", "--output=r.json", "--audit-every", "1", "-m", "pkg.mod", "a", "--b"], options)
    assert values["fmt"] is OutputFormat.json and values["output"] == Path("r.json") and values["audit_every"] == 1
    assert values["module"] == "pkg.mod" and values["program"] == ["a", "--b"]  # the program's, after the module
    assert values["audit_first"] == AUDIT_FIRST and values["fail_on"] is FailOn.error and values["keep_going"] is False
    values = _parse(["--keep-going", "--debug", "train.py", "--output", "mine.json"], options)
    assert values["keep_going"] and values["debug"] and values["program"] == ["train.py", "--output", "mine.json"]
    for line in (["--help"], ["--audit-every", "0", "x.py"], ["--format", "xml", "x.py"], ["--keep-going=1", "x.py"],
                 ["--unknown", "x.py"], ["--max-norm"], []):  # fmt: skip
        assert _parse(line, options) is None, line
