"""Third-party PyTorch training programs that write and read tensors through ``.data`` and ``.numpy()`` in their
loops, run under ``gradcheck exec`` (docs/real-programs.md lists them: source, license, the aliases each takes and
when). They are adaptations of other people's training loops, so they are not committed here: a second reader made
them from the public repositories and keeps them in ``.venv-thirdparty/torch_data/`` (or
``$GRADCHECK_TORCH_DATA_CORPUS``); without them this module skips, saying so. pytorch.unversioned's ``saved-overwritten`` error
must stay silent on every one of them, except where the program really computes a gradient from values written
after the forward that saved them (``TRUE``), proven by the program's ``--check`` against pure torch at the values
each forward used.

Needs torch (``make test-torch``; ``make test`` skips this module).
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch is an optional extra: `make test-torch` runs these tests")

from conftest import TESTS, exec_json, line_of  # noqa: E402

PROGRAMS = Path(os.environ.get("GRADCHECK_TORCH_DATA_CORPUS", TESTS.parent / ".venv-thirdparty" / "torch_data"))
NAMES = sorted(path.stem for path in PROGRAMS.glob("d[0-9][0-9]_*.py"))
if not NAMES:
    pytest.skip(f"the third-party .data corpus is not in {PROGRAMS} (docs/real-programs.md)", allow_module_level=True)
SNGAN = PROGRAMS / "d12_sngan_spectral_norm.py"


def _sngan_subjects() -> set[str]:
    """d12 (christiancosgrove/pytorch-spectral-normalization-gan): the discriminator runs twice (real, fake) before
    one backward, and each call's power iteration assigns ``v.data`` and ``u.data``, Parameters the first call's
    ``MvBackward0`` / ``DotBackward0`` saved: that call's gradient is computed from the second call's u and v. Every
    convolution's pair is written with other values; the linear layer's is not (its u has one element, always 1,
    and its v is w / |w| both times)."""
    v_line = line_of(SNGAN, "v.data = l2normalize(torch.mv(torch.t(")
    u_line = line_of(SNGAN, "u.data = l2normalize(torch.mv(w.view(")
    return {
        f"discriminator.conv{k}.module.weight_{which} (d12_sngan_spectral_norm.py:{line})"
        for k in range(1, 8)
        for which, line in (("u", u_line), ("v", v_line))
    }


# program -> the subjects of the saved-overwritten findings it must have (each a real write after the save)
TRUE = {"d12_sngan_spectral_norm": _sngan_subjects()}
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def runs() -> dict:
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {
            name: pool.submit(exec_json, str(PROGRAMS / f"{name}.py"), env={"WARP_DEVICE": "cpu"}, timeout=300)
            for name in NAMES
        }
    return {name: future.result() for name, future in futures.items()}


def _overwritten(scenario: dict) -> set[str]:
    return {found["subject"] for found in scenario["findings"] if found["evidence"].get("kind") == "saved-overwritten"}


def test_the_corpus_is_there():
    assert len(NAMES) >= 8 and set(TRUE) <= set(NAMES), NAMES


@pytest.mark.parametrize("name", NAMES)
def test_each_program_runs_to_its_end_under_exec(runs, name):
    proc, scenario = runs[name]
    assert scenario["error"] is None and scenario["passes"] > 0, (scenario["error"], proc.stderr[-3000:])
    assert proc.returncode in (0, 1), proc.stderr[-3000:]


@pytest.mark.parametrize("name", NAMES)
def test_no_saved_overwritten_error_unless_the_program_really_writes_a_saved_tensor(runs, name):
    _proc, scenario = runs[name]
    found = _overwritten(scenario)
    if name not in TRUE:
        assert found == set(), found
        return
    assert found == TRUE[name], found ^ TRUE[name]  # each layer's own: a freed storage's address used again is not it
    for finding in scenario["findings"]:
        if finding["evidence"].get("kind") == "saved-overwritten":
            assert finding["check"] == "torch-bridge" and finding["severity"] == "error"


def test_the_sngan_gradient_is_not_the_one_of_the_values_its_forward_used():
    """The proof behind TRUE: the discriminator's .grad after ``disc_loss.backward()`` against pure torch's gradient
    with each call's own u and v (the same recomputation with u and v left as the first call made them gives 0)."""
    out = subprocess.run(
        [sys.executable, str(SNGAN), "--check"], capture_output=True, text=True, timeout=300, cwd=str(TESTS)
    )
    assert out.returncode == 0, out.stderr[-2000:]
    worst = float(out.stdout.split("max relative gradient difference:")[1].split()[0])
    assert worst > 1e-2, worst
