"""gradcheck's own failure has its own exit code, and never hides anything more urgent (docs/usage.md).

A check that raises (``RaisingCheck``, planted in the registry) makes a real ``internal-error`` finding through the
real drivers: alone it is exit 4 under ``run``, ``exec`` and ``ci``; beside a finding about the program it is 1;
beside a scenario or a program that failed it is 3. Also here, issue 41's two mends that a user meets first: ``run``
and ``blame`` with stdout closed still write ``--output``, and ``exec --keep-going`` says once, in its own unit,
which backwards it skipped.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import TESTS, audited, cli_in_process

from gradcheck.model.exit_codes import INTERNAL_ERROR_CHECK, ExitCode, combine, of_failing
from gradcheck.model.options import FailOn

PROGRAMS = TESTS / "programs" / "exit_codes"
LOOP = TESTS / "programs" / "exec" / "training_loop.py"
SPRING = ["--passes", "2", "--fd", "off", "--no-replay", "--device", "cpu"]


def _raising_check():
    spec = importlib.util.spec_from_file_location("raising_check", PROGRAMS / "raising_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.RaisingCheck


@pytest.fixture
def own_failure(monkeypatch):
    """A check of gradcheck's that raises on every trace, registered first for this test only."""
    from gradcheck import checks

    monkeypatch.setattr(checks, "REGISTRY", (_raising_check(), *checks.REGISTRY))


def test_the_code_is_free_and_ranks_below_findings_and_above_ok():
    from gradcheck.checks import internal_error

    assert INTERNAL_ERROR_CHECK == internal_error.NAME
    assert len({int(c) for c in ExitCode}) == len(ExitCode) and ExitCode.INTERNAL_ERROR == 4
    assert of_failing([]) == ExitCode.OK
    assert of_failing([INTERNAL_ERROR_CHECK, INTERNAL_ERROR_CHECK]) == ExitCode.INTERNAL_ERROR
    assert of_failing([INTERNAL_ERROR_CHECK, "nonfinite"]) == ExitCode.FINDINGS
    own = ExitCode.INTERNAL_ERROR
    assert combine([own, ExitCode.OK]) == own
    for more_urgent in (ExitCode.FINDINGS, ExitCode.SCENARIO_ERROR, ExitCode.USAGE, ExitCode.INTERRUPTED):
        assert combine([own, more_urgent]) == more_urgent


def test_the_readme_table_and_the_precedence_name_every_code():
    import re

    readme = (TESTS.parent / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    rows = {int(code) for code in re.findall(r"^\| (\d+) \|", table, re.M)}
    assert rows | {int(ExitCode.TERMINATED)} == {int(c) for c in ExitCode} and "143" in table
    order = "130/143, then 2, then 3, then 1, then 4"
    assert order in table and order in (TESTS.parent / "docs" / "usage.md").read_text(encoding="utf-8")


def _run_json(*args: str):
    proc = cli_in_process("run", *args, "--format", "json")
    return proc.returncode, json.loads(proc.stdout)


def test_run_alone_it_is_4_and_beside_a_finding_1_and_beside_a_failed_scenario_3(own_failure):
    code, report = _run_json("spring-chain", *SPRING)
    (scenario,) = report["scenarios"]
    assert [f["check"] for f in scenario["findings"]] == [INTERNAL_ERROR_CHECK], scenario["findings"]
    assert "ValueError: the check broke on purpose" in scenario["findings"][0]["message"]
    assert code == report["exit_code"] == ExitCode.INTERNAL_ERROR

    code, report = _run_json("spring-chain", "--fault", "optimizer-in-place", *SPRING)
    assert {f["check"] for f in report["scenarios"][0]["findings"]} == {INTERNAL_ERROR_CHECK, "mutated-gradient"}
    assert code == report["exit_code"] == ExitCode.FINDINGS

    code, report = _run_json(str(PROGRAMS / "fails_on_second_pass.py"), *SPRING)
    (scenario,) = report["scenarios"]
    assert "the data file vanished" in scenario["error"] and scenario["passes"] == 1
    assert [f["check"] for f in scenario["findings"]] == [INTERNAL_ERROR_CHECK]  # the first pass was still checked
    assert code == report["exit_code"] == ExitCode.SCENARIO_ERROR


def _exec_code(program, *argv: str) -> tuple[ExitCode, tuple[str, ...]]:
    """The exit code ``gradcheck exec`` gives (its report, judged as the command judges it) and the checks found."""
    from gradcheck.cli.exec_program import _report
    from gradcheck.cli.reporting import judged, suppressions
    from gradcheck.engine.program_audit import audit_program

    result, run = audit_program(str(program), list(argv))
    report = judged(_report(result, run, FailOn.error, debug=False), suppressions(None, None))
    return report.exit_code, tuple(sorted({f.check for f in result.findings}))


def test_exec_alone_it_is_4_and_beside_a_finding_1_and_beside_a_failed_program_3(own_failure, tmp_path):
    assert _exec_code(LOOP, "--iterations", "3") == (ExitCode.INTERNAL_ERROR, (INTERNAL_ERROR_CHECK,))
    code, found = _exec_code(LOOP, "--iterations", "3", "--mistake", "new-tape-zero")
    assert code == ExitCode.FINDINGS and "accumulation" in found and INTERNAL_ERROR_CHECK in found
    fails = tmp_path / "fails.py"
    fails.write_text(
        f"import runpy, sys\nsys.argv = [{str(LOOP)!r}, '--iterations', '2']\n"
        f"runpy.run_path({str(LOOP)!r}, run_name='__main__')\nraise SystemExit(4)\n"
    )
    assert _exec_code(fails) == (ExitCode.SCENARIO_ERROR, (INTERNAL_ERROR_CHECK,))  # the program's 4 is not ours


def test_ci_combines_it_the_same_way(tmp_path, monkeypatch):
    """Each entry in a worker of its own, where the planted scenario registers the raising check: the clean entry is
    gradcheck's failure alone (4), the faulty one a finding too (1); together 1, the first shard alone 4."""
    planted = PROGRAMS / "planted_spring_chain.py"
    (tmp_path / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""\
            [tool.gradcheck]
            passes = 2
            scenarios = [{json.dumps(str(planted))}, {{ spec = {json.dumps(str(planted))}, fault = "optimizer-in-place" }}]
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    proc = cli_in_process("ci", "--device", "cpu", "--format", "json")
    data = json.loads(proc.stdout)
    clean, faulty = data["scenarios"]
    assert [f["check"] for f in clean["findings"]] == [INTERNAL_ERROR_CHECK], clean
    assert {f["check"] for f in faulty["findings"]} >= {INTERNAL_ERROR_CHECK, "mutated-gradient"}, faulty
    assert proc.returncode == data["exit_code"] == ExitCode.FINDINGS
    proc = cli_in_process("ci", "--device", "cpu", "--format", "json", "--shard", "1/2")
    assert proc.returncode == json.loads(proc.stdout)["exit_code"] == ExitCode.INTERNAL_ERROR


def test_run_and_blame_with_stdout_closed_write_their_output_file(tmp_path):
    """``>&-``: python starts with sys.stdout None and fd 1 closed; the report still reaches --output, and the exit
    code is the verdict's (blame: the wrong hand-written adjoint, 1), not a traceback's."""
    gradcheck = f"{sys.executable} -m gradcheck"
    script = (
        f"{gradcheck} run spring-chain --passes 1 --fd off --no-replay --device cpu --format json --output run.json >&-;"
        " echo run=$?;"
        f" {gradcheck} blame spring-chain --fault wrong-func-grad --device cpu --format json --output blame.json >&-;"
        " echo blame=$?"
    )
    env = {k: v for k, v in os.environ.items() if k != "FORCE_COLOR"}
    proc = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    codes = dict(line.split("=") for line in proc.stdout.split())
    assert "Traceback" not in proc.stderr and codes == {"run": "0", "blame": "1"}, proc.stderr[-3000:]
    ran = json.loads((tmp_path / "run.json").read_text())
    assert ran["exit_code"] == 0 and ran["scenarios"][0]["passes"] == 1
    blamed = json.loads((tmp_path / "blame.json").read_text())
    assert blamed["exit_code"] == 1
    assert any(f["check"] == "adjoint-mismatch" for f in blamed["scenarios"][0]["findings"])


def test_keep_going_names_the_skipped_backwards_once_in_backwards_and_a_stop_once():
    from gradcheck.engine.program_audit import audit_program

    kept = audited(LOOP, "--mistake", "aos-freed", "--iterations", "3", keep_going=True)
    assert kept.notes == ("backwards #1–#3 were not launched: dangling adjoint pointer at parts[0].b.grad and 3 more",)
    stopped, run = audit_program(str(LOOP), ["--mistake", "aos-freed", "--iterations", "3"])
    assert run.stopped and len(stopped.notes) == 1, stopped.notes
    assert stopped.notes[0].startswith("gradcheck stopped the program before backward #1")
