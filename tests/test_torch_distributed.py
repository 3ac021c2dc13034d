"""``gradcheck exec`` hosting each rank of ``torchrun`` (issue 44, item 1): real ranks on the CPU (gloo), a DDP loop
with a Warp stage (tests/programs/torch/ddp_train.py). torchrun must see what it sees without gradcheck: the
program's output, each rank's exit status (a finding never fails a rank; a crash or ``sys.exit(N)`` does), and every
rank writes its own report (``--output`` suffixed with the rank, or the default JSON in the working directory).

An elastic restart is driven here through torchrun's environment (``TORCHELASTIC_RESTART_COUNT``), not a real one:
gloo's reconnection after a restart fails or hangs on this machine in about one run of three without gradcheck too
(measured with torchrun alone, torch 2.13).

Needs torch (``make test-torch``; ``make test`` skips this module).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch is an optional extra: `make test-torch` runs these tests")

from conftest import TESTS  # noqa: E402

PROGRAM = TESTS / "programs" / "torch" / "ddp_train.py"
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.timeout(600)


def _torchrun(cwd: Path, *args: str, gradcheck: bool = True) -> subprocess.CompletedProcess:
    """torchrun --standalone (a free port: tests run side by side) with 2 ranks, each running the program under
    ``gradcheck exec ARGS`` (or under python alone)."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "WARP_DEVICE": "cpu"}
    launcher = [str(BIN / "torchrun"), "--standalone", "--nproc-per-node=2"]
    if gradcheck:
        launcher += ["--no-python", "gradcheck", "exec"]
    command = [*launcher, *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=240)


def _ranks_said(stdout: str) -> list[str]:
    """Each rank's closing line (two ranks share the pipe: their lines may run into each other, as without
    gradcheck)."""
    return sorted(re.findall(r"rank \d restart \d: loss [\d.]+", stdout))


def _report(path: Path) -> dict:
    report = json.loads(path.read_text())
    rank = path.name.split(".rank")[1].split(".")[0]
    assert report["environment"]["rank"] == rank and report["environment"]["launcher"] == "torchrun", report
    (scenario,) = report["scenarios"]
    return scenario


def test_each_rank_writes_its_own_report_and_torchrun_sees_the_programs_output(tmp_path):
    plain = _torchrun(tmp_path, str(PROGRAM), gradcheck=False)
    audited = _torchrun(tmp_path, "--format", "json", "--output", "r.json", str(PROGRAM))
    assert plain.returncode == audited.returncode == 0, audited.stderr[-3000:]
    assert _ranks_said(audited.stdout) == _ranks_said(plain.stdout) and len(_ranks_said(plain.stdout)) == 2
    assert "gradcheck" not in audited.stdout
    for rank in (0, 1):
        scenario = _report(tmp_path / f"r.rank{rank}.json")
        assert scenario["status"] == "ok" and scenario["passes"] == 6 and scenario["findings"] == []
    assert not (tmp_path / "r.json").exists()


def test_a_finding_never_fails_a_rank_and_the_default_report_is_json_per_rank(tmp_path):
    audited = _torchrun(tmp_path, str(PROGRAM), "--no-zero-grad")
    assert audited.returncode == 0, audited.stderr[-3000:]
    assert "gradcheck" not in audited.stdout and "error" not in audited.stdout
    for rank in (0, 1):
        scenario = _report(tmp_path / f"gradcheck-report.rank{rank}.json")
        assert any(f["severity"] == "error" for f in scenario["findings"]), scenario["findings"]


@pytest.mark.parametrize("args", [("--fail-rank", "1"), ("--status", "3")], ids=["crash", "exit-status"])
def test_a_failing_rank_fails_torchrun_as_it_does_without_gradcheck(tmp_path, args):
    plain = _torchrun(tmp_path, str(PROGRAM), *args, gradcheck=False)
    audited = _torchrun(tmp_path, "--format", "json", "--output", "r.json", str(PROGRAM), *args)
    assert plain.returncode != 0 and audited.returncode == plain.returncode, audited.stderr[-3000:]
    failing = _report(tmp_path / "r.rank1.json")
    status = "status 1" if args[0] == "--fail-rank" else "status 3"
    assert status in (failing["error"] or ""), failing["error"]


def test_python_m_torch_distributed_run_hosts_gradcheck_as_a_module(tmp_path):
    env = {**os.environ, "WARP_DEVICE": "cpu"}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m", "gradcheck"]
    command += ["exec", "--format", "json", "--output", "m.json", str(PROGRAM), "--steps", "3"]
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [_report(tmp_path / f"m.rank{rank}.json")["passes"] for rank in (0, 1)] == [3, 3]


def test_an_elastic_restart_keeps_the_earlier_attempts_report(tmp_path):
    """The environment torchrun gives a restarted rank, on a one-process program: the attempt's report is named
    after the restart, the first attempt's is left as it was, and stdout holds only the program's own output."""
    pure = TESTS / "programs" / "torch" / "pure_train.py"
    base = {**os.environ, "TORCHELASTIC_RUN_ID": "t", "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"}
    plain = subprocess.run([sys.executable, str(pure), "--steps", "3"], capture_output=True, text=True, timeout=240)
    outputs = []
    for restart in ("0", "1"):
        env = {**base, "TORCHELASTIC_RESTART_COUNT": restart}
        command = [str(BIN / "gradcheck"), "exec", "--output", "p.json", "--format", "json", str(pure), "--steps", "3"]
        proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
        assert proc.returncode == 0 and proc.stdout == plain.stdout, (proc.stdout, proc.stderr[-2000:])
        outputs.append(sorted(p.name for p in tmp_path.iterdir()))
    assert outputs == [["p.rank0.json"], ["p.rank0.json", "p.rank0.restart1.json"]]
