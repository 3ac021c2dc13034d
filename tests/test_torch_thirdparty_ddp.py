"""Third-party DDP training loops under torchrun and ``gradcheck exec``: the cross-rank checks (issue 44) on programs
nobody here wrote (docs/real-programs.md lists them: source, licence, what each loop does). They are adaptations of
other people's code, so they are not committed: they live in ``.venv-thirdparty/ddp_corpus/`` (or
``$GRADCHECK_DDP_CORPUS``); without them this module skips, saying so.

Each runs once on 2 ranks (gloo, CPU) with its own ``--check``: after training it all-gathers its parameters and
prints their largest relative difference across ranks, the ground truth of whether the replicas diverged. The
correct loops must give no cross-rank finding and no error at all; those with a real bug (``TRUE``: a forward
through ``model.module``, a penalty's backward over a graph an earlier backward used, a backbone unfrozen after DDP
was built, a bucket DDP never finished) must give a cross-rank error whose message names that cause.

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

CORPUS = Path(os.environ.get("GRADCHECK_DDP_CORPUS", TESTS.parent / ".venv-thirdparty" / "ddp_corpus"))
NAMES = sorted(path.stem for path in CORPUS.glob("p[0-9][0-9]_*.py"))
if not NAMES:
    pytest.skip(f"the third-party DDP corpus is not in {CORPUS} (docs/real-programs.md)", allow_module_level=True)
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.timeout(900)
# program and arguments -> what a cross-rank error's message must say (a real divergence: the program's own
# all-gather proves it); every other program must give no cross-rank finding and no error
TRUE = {
    ("p04_minimind_grpo_module", ()): "called through .module",  # minimind#853
    ("p06_stylegan2_rosinality", ("--old",)): "retain_graph=True",  # the penalty's backward over a used graph
    ("p07_rae_stage1", ()): "called through .module",  # RAE at HEAD: the discriminator's update via .module
    ("p07_rae_stage1", ("--disc-start", "1", "--disc-upd-start", "1")): "called through .module",
    ("p07_rae_stage1", ("--initial",)): "",
    ("p12_issue47562_gradpenalty", ("--const-bias", "--steps", "1")): "did not finish reducing",
    ("p15_backbone_finetuning", ()): "left",  # unfrozen after DDP was built: never reduced
}
CASES = {(name, ()) for name in NAMES} | set(TRUE) | {
    ("p04_minimind_grpo_module", ("--fixed",)), ("p04_minimind_grpo_module", ("--allreduce",)),
    ("p06_stylegan2_rosinality", ("--old",)), ("p11_issue69031_unused_nosync", ("--vary",)),
    ("p12_issue47562_gradpenalty", ("--plain-loss",)),
}  # fmt: skip
CASES = {case for case in CASES if (CORPUS / f"{case[0]}.py").exists()}


def _run(cwd: Path, name: str, extra: tuple) -> tuple[list[dict], float]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "WARP_DEVICE": "cpu"}
    command = [
        str(BIN / "torchrun"), "--standalone", "--nproc-per-node=2", "--no-python", "gradcheck", "exec",
        "--format", "json", "--output", "r.json", str(CORPUS / f"{name}.py"), "--check", *extra,
    ]  # fmt: skip
    for _attempt in range(2):
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
        if done.returncode == 0:
            break  # else once more: gloo's teardown fails a job now and then on this machine, torchrun alone too
    assert done.returncode == 0, done.stderr[-3000:]
    worst = [float(w) for w in re.findall(r"rank \d worst ([\d.e+-]+)", done.stdout)]
    assert len(worst) == 2, done.stdout
    scenarios = [json.loads((cwd / f"r.rank{r}.json").read_text())["scenarios"][0] for r in (0, 1)]
    for scenario in scenarios:
        assert any(n.startswith("cross-rank checks (DDP): ") and "compared across 2" in n for n in scenario["notes"])
    return [s["findings"] for s in scenarios], max(worst)


@pytest.mark.parametrize(("name", "extra"), sorted(CASES), ids=lambda v: " ".join(v) if isinstance(v, tuple) else v)
def test_third_party_ddp_loop(tmp_path, name, extra):
    findings, worst = _run(tmp_path, name, extra)
    said = TRUE.get((name, extra))
    assert (worst > 1e-3) == (said is not None), worst  # the program's own all-gather: the ground truth
    for found in findings:
        crossed = [f for f in found if f["check"] == "cross-rank"]
        if said is None:
            assert crossed == [] and [f for f in found if f["severity"] == "error"] == [], found
        else:
            assert crossed and all(f["severity"] == "error" for f in crossed), found
            assert any(said in f["message"] for f in crossed), [f["message"] for f in crossed]
