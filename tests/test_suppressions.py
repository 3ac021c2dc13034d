"""Suppressions: --select / --ignore CHECK[:SUBJECT-GLOB] on run, blame, exec and ci, and the same keys in
[tool.gradcheck]. A suppressed finding is moved aside, counted and listed, never dropped, and never decides the
exit code."""

from __future__ import annotations

import pickle
from dataclasses import replace

import pytest
from conftest import ROOT, cli, cli_json, exec_json

from gradcheck.model.errors import UsageError
from gradcheck.model.exit_codes import ExitCode
from gradcheck.model.findings import Finding, Severity
from gradcheck.model.report import Report, ScenarioResult
from gradcheck.model.suppressions import Suppressions, parse_rules

CHECKS = ("accumulation", "zero-audit", "nonfinite", "write-after-read")
RETAIN = str(ROOT / "tests" / "scenarios" / "retain_grad.py")  # --fault no-zero: accumulation x.grad (error),
# zero-audit x.grad and y.grad (warnings)
LOOP = str(ROOT / "tests" / "programs" / "exec" / "training_loop.py")  # --mistake new-tape-zero: the same three


def _finding(check: str, subject: str, severity=Severity.ERROR) -> Finding:
    return Finding(check, severity, subject, "message", "fix")


def _report(*findings: Finding) -> Report:
    return Report(environment={}, scenarios=(ScenarioResult(spec="s", name="s", findings=findings),))


def test_a_subject_glob_takes_brackets_literally():
    """Subjects are full of [5]: only * and ? are wild, so states[*] means any step, never a character class."""
    (rule,) = parse_rules(["accumulation:states[*].joint_q.grad"], "--ignore", CHECKS)
    assert rule.matches(_finding("accumulation", "states[5].joint_q.grad"))
    assert rule.matches(_finding("accumulation", "states[12].joint_q.grad"))
    assert not rule.matches(_finding("accumulation", "states5.joint_q.grad"))
    assert not rule.matches(_finding("accumulation", "states[5].joint_qd.grad"))  # the whole subject must match
    assert not rule.matches(_finding("zero-audit", "states[5].joint_q.grad"))  # and the check
    (one,) = parse_rules(["nonfinite:x?.grad"], "--ignore", CHECKS)
    assert one.matches(_finding("nonfinite", "x1.grad")) and not one.matches(_finding("nonfinite", "x12.grad"))


def test_rules_are_comma_separable_and_a_typo_is_a_usage_error():
    assert [r.text for r in parse_rules(["accumulation, zero-audit:y.*"], "--ignore", CHECKS)] == [
        "accumulation",
        "zero-audit:y.*",
    ]
    with pytest.raises(UsageError, match="unknown check 'acumulation'; checks: accumulation"):
        parse_rules(["acumulation"], "--ignore", CHECKS)
    with pytest.raises(UsageError, match="give a subject glob"):
        parse_rules(["accumulation:"], "--ignore", CHECKS)


def test_suppressed_findings_are_moved_aside_counted_and_never_decide_the_exit_code():
    leak, survivor = _finding("accumulation", "x.grad"), _finding("zero-audit", "y.grad", Severity.WARNING)
    report = _report(leak, survivor)
    assert report.exit_code == ExitCode.FINDINGS
    rules = Suppressions(ignore=parse_rules(["accumulation"], "--ignore", CHECKS))
    judged = rules.apply(report)
    (result,) = judged.scenarios
    assert result.findings == (survivor,)
    assert [(f.subject, f.ignored_by) for f in result.ignored] == [("x.grad", "--ignore accumulation")]
    assert judged.exit_code == ExitCode.OK
    data = judged.to_dict()
    assert data["ignored_count"] == len(result.ignored)
    assert data["scenarios"][0]["ignored"][0]["ignored_by"] == "--ignore accumulation"
    assert pickle.loads(pickle.dumps(result.ignored[0])).ignored_by == "--ignore accumulation"  # crosses workers
    assert "ignored_by" not in survivor.to_dict()  # a reported finding's JSON is unchanged


def test_select_keeps_only_what_it_names_and_the_command_line_replaces_the_configs_select():
    config = Suppressions(select=parse_rules(["zero-audit"], "pyproject.toml select", CHECKS))
    merged = config.merged(["accumulation"], ["accumulation:y.*"], CHECKS)
    assert [r.text for r in merged.select] == ["accumulation"]  # replaced
    report = _report(_finding("accumulation", "x.grad"), _finding("accumulation", "y.grad"), _finding("nonfinite", "x"))
    (result,) = merged.apply(report).scenarios
    assert [f.subject for f in result.findings] == ["x.grad"]
    reasons = {f.check + " " + f.subject: f.ignored_by for f in result.ignored}
    assert reasons == {"accumulation y.grad": "--ignore accumulation:y.*", "nonfinite x": "not selected by --select"}
    assert [r.text for r in config.merged([], ["nonfinite"], CHECKS).select] == ["zero-audit"]  # kept when not given


def test_run_ignores_on_the_command_line_and_lists_what_it_ignored():
    proc, data = cli_json("run", RETAIN, "--fault", "no-zero", "--passes", "3", "--ignore", "accumulation")
    assert proc.returncode == ExitCode.OK, proc.stderr  # the error is suppressed, the warnings do not fail
    (scenario,) = data["scenarios"]
    assert {f["check"] for f in scenario["findings"]} == {"zero-audit"}
    assert [(f["check"], f["ignored_by"]) for f in scenario["ignored"]] == [("accumulation", "--ignore accumulation")]
    assert data["ignored_count"] == 1
    table = cli("run", RETAIN, "--fault", "no-zero", "--passes", "3", "--select", "zero-audit:y.grad")
    summary = " ".join(table.stdout.split("\n\n")[-1].split())  # the last paragraph, however wide the terminal
    assert "2 ignored" in summary and "0 error(s), 1 warning(s)" in summary, table.stdout


def test_the_pyproject_table_suppresses_for_run_exec_and_blame_alike(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.gradcheck]\nignore = ["accumulation:x.*"]\n')
    proc, data = cli_json("run", RETAIN, "--fault", "no-zero", "--passes", "3", cwd=tmp_path)
    assert proc.returncode == ExitCode.OK, proc.stderr
    (ignored,) = data["scenarios"][0]["ignored"]
    assert ignored["check"] == "accumulation" and "[tool.gradcheck] ignore accumulation:x.*" in ignored["ignored_by"]
    proc, scenario = exec_json(LOOP, "--mistake", "new-tape-zero", cwd=tmp_path)
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert [f["check"] for f in scenario["ignored"]] == ["accumulation"]
    assert {f["check"] for f in scenario["findings"]} == {"zero-audit"}


@pytest.mark.parametrize(
    "config, named",
    [
        ('ignore = ["acumulation"]', "unknown check 'acumulation'"),
        ('ignore = "accumulation"', "ignore must be a list"),
        ("select = [3]", "is not a CHECK[:SUBJECT-GLOB] string"),
    ],
)
def test_a_wrong_table_is_a_usage_error_before_anything_runs(tmp_path, config, named):
    (tmp_path / "pyproject.toml").write_text(f"[tool.gradcheck]\n{config}\n")
    for command in (["run", "nosuch-scenario"], ["exec", "nosuch.py"]):
        proc = cli(*command, cwd=tmp_path)
        assert proc.returncode == ExitCode.USAGE
        (line,) = proc.stderr.strip().splitlines()
        assert named in line and "pyproject.toml" in line, line


def test_exec_takes_select_and_ignore_on_its_fast_command_line():
    proc, scenario = exec_json(
        "--ignore", "zero-audit:b.*", "--ignore", "accumulation", LOOP, "--mistake", "new-tape-zero"
    )
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert [f["subject"] for f in scenario["findings"]] == ["x.grad"]
    assert sorted(f["check"] for f in scenario["ignored"]) == ["accumulation", "zero-audit"]
    proc = cli("exec", "--select", "nosuch", LOOP)
    assert proc.returncode == ExitCode.USAGE and "unknown check 'nosuch'" in proc.stderr


def test_ci_ignores_too_and_says_how_many(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.gradcheck]\npasses = 3\nscenarios = [{{ spec = "{RETAIN}", fault = "no-zero" }}]\n'
    )
    proc = cli("ci", "--ignore", "accumulation", cwd=tmp_path, timeout=300)  # without it: exit 1 (test_ci.py)
    assert proc.returncode == ExitCode.OK, proc.stderr
    summary = " ".join(proc.stdout.split("\n\n")[-1].split())  # the last paragraph, however wide the terminal
    assert "(1 ignored)" in proc.stdout and ", 1 ignored" in summary, proc.stdout


def test_a_finding_that_stands_for_a_family_is_suppressed_by_any_member():
    """The subjects a finding covers are its evidence's (``Finding.subjects``); tests/test_typed_evidence.py does
    the same on real run and exec output."""
    from gradcheck.checks.accumulation import CarriedAccumulation
    from gradcheck.checks.write_after_read import WriteAfterReadEvidence

    members = [f"controls[{i}].joint_f.grad" for i in range(100)]
    carried = CarriedAccumulation("carried", 2, None, members[:1], 1, [2], 1, members, False, 1.0)
    family = Finding("accumulation", Severity.ERROR, members[0], "m", "fix", carried)
    single = _finding("accumulation", "controls[0].joint_f.grad")
    (rule,) = parse_rules(["accumulation:controls[5].joint_f.grad"], "--ignore", CHECKS)
    assert rule.matches(family) and not rule.matches(single)  # one array is itself only
    rewritten = WriteAfterReadEvidence(["solver.J", "solver.M"], 3, [], [])
    listed = Finding("write-after-read", Severity.WARNING, "solver.*", "m", "fix", rewritten)
    (by_member,) = parse_rules(["write-after-read:solver.M"], "--ignore", CHECKS)
    assert by_member.matches(listed)


def test_a_misspelt_key_in_the_table_is_a_usage_error_for_every_command(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.gradcheck]\nignores = ["nonfinite"]\n')
    proc = cli("run", "nosuch-scenario", cwd=tmp_path)
    assert proc.returncode == ExitCode.USAGE
    assert "unknown key 'ignores'; did you mean 'ignore'?" in proc.stderr


def test_junit_marks_a_suppressed_check_skipped_not_passed():
    import xml.etree.ElementTree as ET

    from gradcheck.formats import OutputFormat, render

    rules = Suppressions(ignore=parse_rules(["accumulation"], "--ignore", CHECKS))
    report = rules.apply(_report(_finding("accumulation", "x.grad")))
    root = ET.fromstring(render(replace(report, checks=CHECKS), OutputFormat.junit))
    skipped = root.find(".//testcase[@name='accumulation']/skipped")
    assert skipped is not None and "--ignore accumulation" in skipped.get("message")
    assert root.find(".//testcase[@name='nonfinite']/skipped") is None
