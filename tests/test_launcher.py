"""engine.launcher: which rank of which launcher a ``gradcheck exec`` process is, read from the environment torchrun
and srun set, and the report file each rank writes (no two processes ever write one). torchrun itself, with real
ranks, is tests/test_torch_distributed.py's."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradcheck.engine.launcher import DEFAULT_OUTPUT, Launch, current

TORCHRUN = {"TORCHELASTIC_RUN_ID": "abc", "RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4"}


def test_torchrun_and_srun_ranks_are_read_and_a_plain_run_is_none():
    assert current(TORCHRUN) == Launch("torchrun", 3, 1, 4, 0)
    assert current({**TORCHRUN, "TORCHELASTIC_RESTART_COUNT": "2"}).restart == 2
    srun = {"SLURM_PROCID": "5", "SLURM_LOCALID": "1", "SLURM_NTASKS": "8", "SLURM_STEP_ID": "0"}
    assert current(srun) == Launch("slurm", 5, 1, 8, 0)
    assert current({"SLURM_PROCID": "0", "SLURM_NTASKS": "8"}) is None  # the batch script itself is not a rank
    assert current({}) is None and current({"RANK": "1"}) is None  # RANK alone: a program's own variable
    assert current({**TORCHRUN, "RANK": "x"}) is None


@pytest.mark.parametrize(
    "given,first,restarted",
    [
        ("/r/report.json", "/r/report.rank3.json", "/r/report.rank3.restart2.json"),
        ("/r/report", "/r/report.rank3", "/r/report.rank3.restart2"),
        ("/r/report-{rank}.json", "/r/report-3.json", "/r/report-3.restart2.json"),
        ("/r/{rank}-{restart}.json", "/r/3-0.json", "/r/3-2.json"),
        ("/r/node{local_rank}.json", "/r/node1.rank3.json", "/r/node1.rank3.restart2.json"),  # local_rank repeats
        ("/r/of{world_size}.json", "/r/of4.rank3.json", "/r/of4.rank3.restart2.json"),
    ],
)
def test_each_rank_and_each_restart_gets_its_own_file(given, first, restarted):
    assert Launch("torchrun", 3, 1, 4, 0).output(Path(given)) == Path(first)
    assert Launch("torchrun", 3, 1, 4, 2).output(Path(given)) == Path(restarted)


def test_without_output_a_rank_writes_the_default_json_in_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    stem = DEFAULT_OUTPUT.rsplit(".", 1)[0]
    assert Launch("torchrun", 0, 0, 2, 0).output(None) == tmp_path / f"{stem}.rank0.json"
