"""`gradcheck selftest` exits 0 on CPU; `gradcheck new NAME` writes a scenario that runs as is."""

from __future__ import annotations

import pytest
from conftest import cli

from gradcheck.model.exit_codes import ExitCode


@pytest.mark.slow
def test_selftest_passes_on_cpu():
    import warp as wp

    from gradcheck.engine.selftest import cases

    proc = cli("selftest", "--device", "cpu", "--passes", "3")  # vanishing judges 3 backwards at least
    assert proc.returncode == ExitCode.OK, proc.stdout + proc.stderr
    assert f"{len(cases(wp.__version__))} passed, 0 failed, 0 skipped" in proc.stdout
    assert "FALSE POSITIVE" not in proc.stdout and "MISS" not in proc.stdout


def test_new_writes_a_runnable_scenario(tmp_path):
    proc = cli("new", "my-rollout", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "my_rollout.py").is_file()
    run = cli("run", "my_rollout.py", "--passes", "2", "--device", "cpu", cwd=tmp_path)
    assert run.returncode == ExitCode.OK, run.stdout + run.stderr
    assert "no findings" in run.stdout
    again = cli("new", "my-rollout", cwd=tmp_path)
    assert again.returncode == ExitCode.USAGE and "already exists" in again.stderr
