"""Every command renders through the formats registry: table and json everywhere, JUnit where results are a
pass/fail suite, a format a command cannot print is a usage error, a usage error is still one document in the
format asked for, and a report that cannot be written is one line and exit 2 in every command."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import xmlschema
from conftest import ROOT, cli, cli_json

from gradcheck.model.exit_codes import ExitCode

JUNIT_SCHEMA = ROOT / "tests" / "data" / "junit.xsd"
RETAIN = str(ROOT / "tests" / "scenarios" / "retain_grad.py")  # --fault no-zero: an accumulation error
LOOP = str(ROOT / "tests" / "programs" / "exec" / "training_loop.py")  # --mistake new-tape-zero: the same
QUICK_RUN = ("run", RETAIN, "--fault", "no-zero", "--passes", "3")
QUICK_EXEC = ("exec", LOOP, "--mistake", "new-tape-zero")
PASS_FAIL_COMMANDS = {"run", "blame", "exec", "ci", "selftest"}
RUN_ONLY_CHECKS = {"fd-mismatch", "stateful-forward", "reentrancy"}  # README: the one difference between run and exec


def _junit(text: str):
    """The XML, validated against the common JUnit schema; its root."""
    import xml.etree.ElementTree as ET

    xmlschema.XMLSchema(str(JUNIT_SCHEMA)).validate(text)
    return ET.fromstring(text)


def _one_error_line(proc) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.startswith("gradcheck: ")]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


@pytest.mark.parametrize("command", ["explain", "list", "doctor", "sweep"])
def test_junit_where_results_are_not_a_suite_is_a_usage_error_naming_the_formats(command):
    args = {"sweep": ["sweep", "cartpole", "--set", "steps=3,4"]}.get(command, [command])
    proc = cli(*args, "--format", "junit", timeout=60)
    assert proc.returncode == ExitCode.USAGE
    assert _one_error_line(proc) == f"gradcheck: error: gradcheck {command} has no --format junit; use table or json"
    assert proc.stdout == ""  # nothing ran, nothing printed


@pytest.mark.parametrize("command", ["explain", "list"])
def test_table_and_json_for_the_commands_that_print_no_gradient_report(command):
    table = cli(command)
    assert table.returncode == ExitCode.OK and table.stdout.strip(), table.stderr
    assert not [line for line in table.stdout.splitlines() if line != line.rstrip()], "trailing blanks"
    proc, data = cli_json(command)
    assert proc.returncode == ExitCode.OK
    names = [c["name"] for c in data["checks"]] if command == "explain" else [s["name"] for s in data]
    assert names and all(name in table.stdout for name in names)


def test_explain_one_check_in_json_carries_its_full_text():
    proc, data = cli_json("explain", "accumulation")
    (check,) = data["checks"]
    assert check["name"] == "accumulation" and "tape.zero()" in check["explain"]


def test_run_and_exec_as_junit_name_the_failing_check():
    for args in (QUICK_RUN, QUICK_EXEC):
        proc = cli(*args[:1], "--format", "junit", *args[1:])
        assert proc.returncode == ExitCode.FINDINGS, proc.stderr
        xml = proc.stdout[proc.stdout.index("<?xml") :]  # exec: after the program's own output
        root = _junit(xml)
        failed = [case.get("name") for case in root.iter("testcase") if case.find("failure") is not None]
        assert failed == ["accumulation"], xml
        assert int(root.get("tests")) == len(list(root.iter("testcase")))
        skipped = {case.get("name"): case.find("skipped").get("message") for case in root.iter("testcase")
                   if case.find("skipped") is not None}  # fmt: skip
        if args is QUICK_RUN:
            assert skipped == {}
        else:  # a program runs once: what needs the forward again has no evidence, and must not read as a pass
            # adjoint-mismatch is judged by exec's default adjoint test (skipped only with --no-adjoint-test)
            assert set(skipped) == RUN_ONLY_CHECKS, xml
            assert all(why.startswith("needs gradcheck run") for why in skipped.values())


def test_exec_judges_adjoint_mismatch_unless_the_adjoint_test_is_off():
    from gradcheck.checks import not_judged_under_exec

    assert set(not_judged_under_exec(blame=True)) == RUN_ONLY_CHECKS
    off = not_judged_under_exec(blame=False)
    assert set(off) == RUN_ONLY_CHECKS | {"adjoint-mismatch"} and "--no-adjoint-test" in off["adjoint-mismatch"]


def test_ci_prints_junit_as_its_format_too(tmp_path):
    (tmp_path / "pyproject.toml").write_text(f'[tool.gradcheck]\npasses = 3\nscenarios = ["{RETAIN}"]\n')
    proc = cli("ci", "--format", "junit", cwd=tmp_path, timeout=300)
    assert proc.returncode == ExitCode.OK, proc.stderr
    root = _junit(proc.stdout)
    assert root.get("failures") == "0" and int(root.get("tests")) > 0


def test_selftest_renders_as_a_suite():
    """The selftest document in each format (the full matrix runs in the slow lane's selftest tests)."""
    from gradcheck.formats import OutputFormat, render
    from gradcheck.model.documents import SelftestDoc, SelftestRow

    rows = (
        SelftestRow("cartpole --fault no-zero", ("accumulation",), ("accumulation", "zero-audit"), "ok"),
        SelftestRow("cartpole", (), ("fd-mismatch",), "FALSE POSITIVE"),
        SelftestRow("cloth", (), (), "skipped", "Newton needs warp-lang >= 1.17"),
    )
    doc = SelftestDoc(rows, "cpu")
    root = _junit(render(doc, OutputFormat.junit))
    assert (root.get("tests"), root.get("failures")) == ("3", "1")
    assert root.find(".//testcase[@name='cloth']/skipped") is not None
    assert json.loads(render(doc, OutputFormat.json))["exit_code"] == ExitCode.FINDINGS
    assert "1 passed, 1 failed, 1 skipped" in render(doc, OutputFormat.table)


USAGE_ERRORS = {
    "run": ["run", "nosuch-scenario"],
    "blame": ["blame", "nosuch-scenario"],
    "exec": ["exec", "nosuch.py"],
    "sweep": ["sweep", "nosuch-scenario", "--set", "steps=3,4"],
    "explain": ["explain", "nosuch"],
    "list": ["list", "--output", "."],
    "doctor": ["doctor", "--cuda-arch", "abc"],
    "selftest": ["selftest", "--device", "cuda:99"],
    "ci": ["ci", "--shard", "3/2"],
}


@pytest.mark.parametrize("command", sorted(USAGE_ERRORS))
def test_a_usage_error_is_one_line_and_one_json_document_in_every_command(command):
    name, *rest = USAGE_ERRORS[command]
    proc = cli(name, "--format", "json", *rest, timeout=120)  # before exec's program: the rest is the program's
    assert proc.returncode == ExitCode.USAGE
    line = _one_error_line(proc)
    data = json.loads(proc.stdout)
    assert data["error"] and data["error"] in line


@pytest.mark.parametrize("command", sorted(PASS_FAIL_COMMANDS - {"selftest", "ci"}))
def test_a_usage_error_under_junit_is_one_errored_suite(command):
    name, *rest = USAGE_ERRORS[command]
    proc = cli(name, "--format", "junit", *rest, timeout=120)
    assert proc.returncode == ExitCode.USAGE
    root = _junit(proc.stdout)
    assert root.get("errors") == "1"


WRITE_FAILS = {
    "explain": ["explain"],
    "list": ["list"],
    "run": list(QUICK_RUN),
    "exec": list(QUICK_EXEC[:1]) + ["--output", "/dev/full"] + list(QUICK_EXEC[1:]),
}


@pytest.mark.parametrize("command", sorted(WRITE_FAILS))
def test_an_output_that_cannot_be_written_is_one_line_and_exit_2(command):
    args = WRITE_FAILS[command] + ([] if command == "exec" else ["--output", "/dev/full"])
    proc = cli(*args, timeout=120)
    assert proc.returncode == ExitCode.USAGE, proc.stderr
    assert "cannot write --output '/dev/full'" in _one_error_line(proc)


def _cli_to(stdout, *args: str):
    """The CLI with its stdout on ``stdout`` (a file or descriptor the test chose), stderr captured."""
    return subprocess.run(
        [sys.executable, "-m", "gradcheck", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("command", ["explain", "run"])
def test_a_stdout_that_cannot_be_written_is_one_line_and_exit_2(command):
    args = {"explain": ["explain"], "run": list(QUICK_RUN)}[command]
    with open("/dev/full", "w") as full:
        proc = _cli_to(full, *args)
    assert proc.returncode == ExitCode.USAGE
    assert "cannot write the report to stdout" in _one_error_line(proc)


@pytest.mark.parametrize(
    ("args", "verdict"),
    [(["explain"], ExitCode.OK), (list(QUICK_RUN), ExitCode.FINDINGS), (["explain", "--bogus"], ExitCode.USAGE)],
    ids=["explain", "run-with-findings", "usage-error"],
)
def test_a_reader_that_went_away_is_quiet_and_the_verdict_stands(args, verdict):
    """`gradcheck run ... | head -3`: the reader took what it wanted. No traceback, no error line about the pipe,
    and the exit code is still the verdict, so `set -o pipefail` in CI sees findings as findings."""
    import os

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte: every write meets EPIPE
    try:
        proc = _cli_to(write_end, *args, "--format", "json")
    finally:
        os.close(write_end)
    assert proc.returncode == verdict, proc.stderr
    assert "Traceback" not in proc.stderr and "Broken pipe" not in proc.stderr, proc.stderr
    assert [line for line in proc.stderr.splitlines() if line.startswith("gradcheck: ")] == (
        ["gradcheck: error: No such option: --bogus; see `gradcheck explain --help`"]
        if verdict == ExitCode.USAGE
        else []
    )


@pytest.mark.slow  # NVRTC compiles are never cached: ~5 s; test_doctor.py proves the compile in the fast lane
def test_doctor_writes_its_output_file(tmp_path):
    target = tmp_path / "doctor.json"
    proc = cli("doctor", "--cuda-arch", "80", "--format", "json", "--output", str(target), timeout=300)
    assert proc.returncode in (ExitCode.OK, ExitCode.FINDINGS), proc.stderr
    assert proc.stdout == ""
    data = json.loads(target.read_text())
    assert [row["arch"] for row in data["cuda_compile"]] == [80]


def test_a_format_the_parser_rejects_is_named_with_the_commands_own_formats():
    proc = cli("explain", "--format", "xml")
    assert proc.returncode == ExitCode.USAGE
    assert "--format 'xml' is not one gradcheck explain prints; use table or json" in _one_error_line(proc)


def test_a_ci_baseline_that_is_a_directory_is_named_as_one(tmp_path):
    (tmp_path / "pyproject.toml").write_text(f'[tool.gradcheck]\nscenarios = ["{RETAIN}"]\n')
    proc = cli("ci", "--baseline", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == ExitCode.USAGE
    assert "is a directory; give the baseline's file" in _one_error_line(proc)


def test_text_from_the_program_is_never_markup(tmp_path):
    """An error, an option value or a subject with brackets ([tool.gradcheck], [/data]) prints as written: Rich
    would read it as markup, drop it or crash on it."""
    from gradcheck.formats import OutputFormat, render
    from gradcheck.model.report import Report, ScenarioResult

    error = "expected shape [n, 3], got [batch] from [tool.gradcheck] and [/data/x.npz]"
    result = ScenarioResult(spec="s.py", name="s", options={"n": "[bold]7"}, error=error)
    text = render(Report(environment={}, scenarios=(result,), error="[/x] stopped"), OutputFormat.table)
    assert " ".join(text.split()).count(error) == 1 and "(n=[bold]7)" in text and "[/x] stopped" in text


def test_a_usage_error_document_replaces_what_output_held_but_never_an_input(tmp_path):
    stale = tmp_path / "report.json"
    stale.write_text('{"exit_code": 0}')
    proc = cli("explain", "nosuch", "--format", "json", "--output", str(stale))
    assert proc.returncode == ExitCode.USAGE and proc.stdout == ""
    assert "unknown check 'nosuch'" in json.loads(stale.read_text())["error"]  # no stale report left for CI
    scenario = tmp_path / "mine.py"
    scenario.write_text("# a scenario\n")
    proc = cli("run", str(scenario), "--format", "json", "--output", str(scenario))
    assert proc.returncode == ExitCode.USAGE and scenario.read_text() == "# a scenario\n"
    assert "is one of this run's inputs" in json.loads(proc.stdout)["error"]


def test_output_with_an_equals_sign_is_output_when_stdout_is_closed(tmp_path):
    target = tmp_path / "list.json"
    proc = subprocess.run(
        [sys.executable, "-m", "gradcheck", "list", "--format", "json", f"--output={target}"],
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        timeout=120,
        stdin=subprocess.DEVNULL,
        preexec_fn=lambda: __import__("os").close(1),
    )
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert json.loads(target.read_text())


def test_ci_refuses_two_of_its_files_on_one_path(tmp_path):
    (tmp_path / "pyproject.toml").write_text(f'[tool.gradcheck]\nscenarios = ["{RETAIN}"]\n')
    proc = cli("ci", "--output", "j.xml", "--junit", "j.xml", cwd=tmp_path)
    assert proc.returncode == ExitCode.USAGE
    assert "--output and --junit both name 'j.xml'" in _one_error_line(proc)


def test_selftest_needs_the_passes_its_leaks_show_on():
    proc = cli("selftest", "--passes", "1")
    assert proc.returncode == ExitCode.USAGE and "--passes" in proc.stderr
