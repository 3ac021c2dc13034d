"""``gradcheck combine``: the ranks' reports of a launched job merged into one (issue 44, item 2). The reports here are
real ones: ``gradcheck exec`` on a Warp training loop (tests/programs/exec/training_loop.py) in the environment
torchrun gives each rank (engine.launcher), rank 1 with a mistake rank 0 does not make, and an elastic restart of
rank 1. torchrun itself: tests/test_torch_distributed.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TESTS, cli

PROGRAM = TESTS / "programs" / "exec" / "training_loop.py"
pytestmark = pytest.mark.timeout(600)


def _rank(tmp: Path, rank: int, restart: int, *argv: str) -> None:
    env = {**os.environ, "TORCHELASTIC_RUN_ID": "t", "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2",
           "TORCHELASTIC_RESTART_COUNT": str(restart), "WARP_DEVICE": "cpu"}  # fmt: skip
    command = [sys.executable, "-m", "gradcheck", "exec", "--format", "json", "--output", "r.json", str(PROGRAM), *argv]
    proc = subprocess.run(command, cwd=tmp, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]  # a rank ends as its program did, findings or not


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("job")
    _rank(tmp, 0, 0)
    _rank(tmp, 1, 0, "--mistake", "nan-at", "--at", "1")  # the attempt a restart replaced
    _rank(tmp, 1, 1, "--mistake", "new-tape-zero")
    return tmp


def _combined(job: Path, *args: str):
    proc = cli("combine", "--format", "json", *args, cwd=str(job))
    return proc, json.loads(proc.stdout)


def test_findings_once_each_with_the_ranks_that_saw_them_and_the_combined_exit_code(job):
    proc, report = _combined(job, "r.rank0.json", "r.rank1.json", "r.rank1.restart1.json")
    assert proc.returncode == 1 and report["exit_code"] == 1, proc.stderr
    (scenario,) = report["scenarios"]
    assert scenario["findings"], scenario
    for found in scenario["findings"]:
        assert found["evidence"]["ranks"] == ["1"] and found["evidence"]["of"] == 2
        assert found["message"].endswith("[rank 1 of 2]")
    assert {f["check"] for f in scenario["findings"]} == {"accumulation", "zero-audit"}  # restart 1's, not attempt 0's
    proc, report = _combined(job, "--fail-on", "warning", "r.rank0.json", "r.rank1.json", "r.rank1.restart1.json")
    assert proc.returncode == 1 and report["fail_on"] == "warning"
    notes = "\n".join(scenario["notes"])
    assert "rank 0: 5 backwards, 0 error(s)" in notes and "rank 1: 5 backwards, " in notes
    assert "r.rank1.json (restart 0) superseded by restart 1 (r.rank1.restart1.json)" in notes
    assert report["environment"]["combined"].startswith("2 report(s): 0 (r.rank0.json), 1 (r.rank1.restart1.json)")


def test_a_finding_every_rank_saw_is_one_finding_without_a_rank_list_in_its_message(job):
    proc, report = _combined(job, "r.rank0.json", "r.rank0.json")
    assert proc.returncode == 0 and report["scenarios"][0]["findings"] == [], proc.stderr
    proc, report = _combined(job, "r.rank1.restart1.json", "r.rank1.restart1.json")
    for found in report["scenarios"][0]["findings"]:
        assert "[rank" not in found["message"] and found["evidence"]["ranks"] == ["1"]


def test_table_and_junit_print_the_combined_report(job):
    table = cli("combine", "r.rank0.json", "r.rank1.restart1.json", cwd=str(job))
    assert table.returncode == 1 and "[rank 1 of 2]" in table.stdout and "rank 0: 5 backwards" in table.stdout
    junit = cli("combine", "--format", "junit", "r.rank0.json", "r.rank1.restart1.json", cwd=str(job))
    assert junit.returncode == 1 and "<failure" in junit.stdout and "accumulation" in junit.stdout


def test_an_unreadable_file_is_named_and_the_others_are_still_combined(job):
    (job / "notes.txt").write_text("not json")
    proc, report = _combined(job, "r.rank0.json", "notes.txt", "missing.json")
    assert proc.returncode == 2 and len(report["scenarios"]) == 1
    assert "notes.txt: not JSON" in report["error"] and "missing.json: no such file" in report["error"]
    assert proc.stderr.count("gradcheck: error:") == 1
    proc = cli("combine", "notes.txt", cwd=str(job))
    assert proc.returncode == 2 and "notes.txt: not JSON" in proc.stderr and "Traceback" not in proc.stderr


def test_a_rank_that_stopped_with_an_error_of_its_own_carries_it_into_the_combined_report(job, tmp_path):
    env = {**os.environ, "TORCHELASTIC_RUN_ID": "t", "RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2"}
    command = [sys.executable, "-m", "gradcheck", "exec", "--format", "json", "--output", "e.json", "missing.py"]
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and not (tmp_path / "e.json").exists()  # the usage error went to the rank's file
    (tmp_path / "e.rank0.json").write_bytes((job / "r.rank0.json").read_bytes())
    proc, report = _combined(tmp_path, "e.rank0.json", "e.rank1.json")
    assert proc.returncode == 2 and report["error"].startswith("rank 1: no such script 'missing.py'"), report
    assert len(report["scenarios"]) == 1  # rank 0's program is still reported
