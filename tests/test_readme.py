"""The README's scenario-contract example is real code: it runs and is clean."""

from __future__ import annotations

import re

from conftest import ROOT, run_scenario


def _first_python_block(heading: str) -> str:
    """The first ```python block after ``heading`` in the README, as a user would copy it."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.search(r"```python\n(.*?)```", text[text.index(heading) :], re.S).group(1)


def test_readme_contract_example_runs_clean(tmp_path):
    path = tmp_path / "readme_linear.py"
    path.write_text(_first_python_block("## The scenario contract"))
    result, _ = run_scenario(str(path), passes=3, n="3")
    assert result.error is None, result.error
    assert result.name == "linear"
    assert result.findings == ()
    assert result.params[0].norms == (14**0.5,) * 3  # d/dx sum((i+1) x_i) = [1, 2, 3]


def test_readme_documents_every_builtin_fault():
    from gradcheck.scenario.catalog import builtin_infos

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for info in builtin_infos():
        assert f"`{info.name}`" in text
        for fault in info.faults:
            assert f"`{fault}`" in text, fault


def test_readme_clipping_example_runs(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "clip_example.py"
    path.write_text(_first_python_block("## Clipping"))
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line and not line.startswith(("Warp", "Module", "   "))]
    total, changed = lines[-1].split()
    assert abs(float(total) - 3.0) < 1e-4  # x.grad after clip_on_tape has norm 3
    assert int(changed) > 0
