"""The cross-rank checks (issue 44, item 3) on real DDP jobs: 2 ranks of torchrun on the CPU (gloo), each mistake of
tests/programs/torch/ddp_faults.py found and each correct twin silent, and the exchange's deadline on a real store.

Each case runs once under ``gradcheck exec`` with the program's own ``--check``: after training, the program
all-gathers its parameters and prints their largest relative difference across ranks. So each mistake is proven to
make the replicas differ, and each twin to keep them equal, by the program itself, beside what gradcheck says.

Needs torch (``make test-torch``; ``make test`` skips this module).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch is an optional extra: `make test-torch` runs these tests")

from conftest import TESTS  # noqa: E402

PROGRAM = TESTS / "programs" / "torch" / "ddp_faults.py"
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.timeout(900)

# case -> (the kind found, its subject); each found by both ranks
MISTAKES = {
    "added-after": ("gradient-diverged", "net.out.weight.grad"),
    "grad-call": ("gradient-diverged", "net.out.weight.grad"),
    "module-forward": ("gradient-diverged", "net.inp.weight.grad"),
    "param-write": ("parameter-diverged", "net.out.weight"),
    "grad-none": ("gradient-missing", "net.inp.bias.grad"),
}
TWINS = (
    "clean",
    "captured",
    "added-after-same",
    "param-write-all",
    "no-sync",
    "bucket-inplace",
    "unused",
    "gan",
    "zero",
)


def _line(text: str) -> str:
    """``ddp_faults.py:N`` of the program's line that holds ``text``."""
    (number,) = [n for n, line in enumerate(PROGRAM.read_text().splitlines(), 1) if text in line]
    return f"ddp_faults.py:{number}"


def _audit(cwd: Path, case: str, ranks: int = 2) -> tuple[list[dict], float]:
    """Each rank's cross-rank findings, and the program's own largest difference across ranks."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "WARP_DEVICE": "cpu"}
    command = [
        str(BIN / "torchrun"), "--standalone", f"--nproc-per-node={ranks}", "--no-python", "gradcheck", "exec",
        "--format", "json", "--output", "r.json", str(PROGRAM), "--case", case, "--check",
    ]  # fmt: skip
    for _attempt in range(2):
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
        if done.returncode == 0:
            break  # else once more: gloo's teardown fails a job now and then on this machine, torchrun alone too
    assert done.returncode == 0, done.stderr[-3000:]
    worst = [float(w) for w in re.findall(r"rank \d worst ([\d.e+-]+)", done.stdout)]
    assert len(worst) == ranks, done.stdout
    found = []
    for rank in range(ranks):
        (scenario,) = json.loads((cwd / f"r.rank{rank}.json").read_text())["scenarios"]
        steps = 12 if case == "gan" else 4  # a GAN step is three backwards
        said = f"cross-rank checks (DDP): {steps} audited backward(s) compared across {ranks}"
        assert any(n.startswith(said) for n in scenario["notes"]), scenario["notes"]
        found.append([f for f in scenario["findings"] if f["check"] == "cross-rank"])
    return found, max(worst)


@pytest.mark.parametrize("case", sorted(MISTAKES))
def test_each_mistake_is_an_error_on_every_rank_naming_the_tensor(tmp_path, case):
    found, worst = _audit(tmp_path, case)
    assert worst > 1e-3, f"{case}: the replicas did not diverge ({worst})"
    kind, subject = MISTAKES[case]
    for findings in found:
        if case == "module-forward":  # every gradient of the model: one finding each, the first named here
            assert {f["evidence"]["kind"] for f in findings} == {kind} and len(findings) == 5
            assert "called through .module" in findings[0]["message"]
            findings = [f for f in findings if f["subject"] == subject]
        assert [(f["severity"], f["evidence"]["kind"], f["subject"]) for f in findings] == [("error", kind, subject)]
        assert findings[0]["evidence"]["world_size"] == 2 and findings[0]["evidence"]["differing_ranks"]
    message = found[0][0]["message"]
    if case == "added-after":  # written in place after backward, by Warp: the call is named
        assert (
            "written in place between backward and the step" in message
            and _line("penalised = wp.from_torch(") in message
        )
    if case == "grad-call":
        assert "replaced (.grad = ...)" in message
    if case == "param-write":
        site = _line("wp.launch(clamp,")
        assert site in message and found[0][0]["evidence"]["site"].endswith(site)


@pytest.mark.parametrize("case", TWINS)
def test_each_correct_twin_is_silent(tmp_path, case):
    found, worst = _audit(tmp_path, case)
    assert worst == 0.0, f"{case}: the replicas differ ({worst})"
    assert found == [[], []]


def test_of_three_ranks_the_one_that_wrote_alone_is_named(tmp_path):
    found, worst = _audit(tmp_path, "param-write", ranks=3)  # rank 0 alone clamps: ranks 1 and 2 agree
    assert worst > 1e-3
    for findings in found:
        assert [(f["evidence"]["kind"], f["evidence"]["differing_ranks"]) for f in findings] == [
            ("parameter-diverged", [0])
        ]
        assert "rank(s) 0 of 3" in findings[0]["message"]


def test_a_gradient_replaced_under_bucket_view_is_a_warning(tmp_path):
    found, worst = _audit(tmp_path, "bucket-replaced")
    assert worst == 0.0  # the values stay right: the warning is about memory and stale references
    for findings in found:
        assert [(f["severity"], f["evidence"]["kind"], f["subject"]) for f in findings] == [
            ("warning", "bucket-detached", "net.out.weight.grad")
        ]


def test_an_unused_parameter_under_find_unused_parameters_is_not_a_missing_gradient(tmp_path):
    _audit(tmp_path, "unused")
    (scenario,) = json.loads((tmp_path / "r.rank0.json").read_text())["scenarios"]
    assert [f for f in scenario["findings"] if f["check"] == "missing-gradient"] == []


def test_combine_shows_a_divergence_once_with_both_ranks(tmp_path):
    _audit(tmp_path, "added-after")
    reports = [str(tmp_path / f"r.rank{r}.json") for r in (0, 1)]
    done = subprocess.run(
        [str(BIN / "gradcheck"), "combine", "--format", "json", *reports], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1, done.stderr
    (finding,) = [f for s in json.loads(done.stdout)["scenarios"] for f in s["findings"] if f["check"] == "cross-rank"]
    assert finding["evidence"]["ranks"] == ["0", "1"] and "[rank" not in finding["message"]


# -- the exchange on a real store: a rank that never posts is no verdict, within the deadline ----------------------
def _store():
    from torch.distributed import TCPStore

    return TCPStore("127.0.0.1", 0, 1, True, timeout=__import__("datetime").timedelta(seconds=10))


def test_a_rank_that_never_posts_is_no_verdict_within_the_deadline():
    from gradcheck.pytorch.rank_exchange import RankExchange

    exchange = RankExchange(_store(), rank=0, world=2, namespace="t/0")
    exchange.post(("r", 3), {"0.0": {"n": 1}}, "backward #3")
    assert exchange.ready() == []  # rank 1 has not posted: nothing to compare yet, and no wait
    began = time.monotonic()
    assert exchange.settle(0.5) == []
    assert time.monotonic() - began < 5
    assert exchange.lost == ["backward #3: rank(s) 1 did not post it within 0.5 s (GRADCHECK_RANK_TIMEOUT)"]


def test_a_rank_that_ended_earlier_is_no_verdict_at_once_and_read_steps_are_deleted():
    from gradcheck.pytorch.rank_exchange import RankExchange

    store = _store()
    first, second = (RankExchange(store, rank=r, world=2, namespace="t/1") for r in (0, 1))
    first.post(("r", 1), {"a": 1}, "backward #1")
    second.post(("r", 1), {"a": 2}, "backward #2")  # rank 1's second backward: its first was under no_sync()
    assert [(step, payloads) for step, payloads in first.ready()] == [(("r", 1), {0: {"a": 1}, 1: {"a": 2}})]
    assert [step for step, _ in second.ready()] == [("r", 1)]
    assert not store.check([f"{first.prefix}/r1/0"])  # read by both: gone from the store
    first.post(("r", 3), {"a": 1}, "backward #3")
    second.post(("r", 4), {"a": 1}, "backward #5")  # rank 1 audited the next one: step 3 is no verdict at once
    assert first.ready() == [] and first.lost == ["backward #3: rank(s) 1 did not audit it"]
    first.post(("r", 5), {"a": 1}, "backward #5")
    second.settle(0.0)  # rank 1 ends
    began = time.monotonic()
    assert first.settle(30.0) == []
    assert time.monotonic() - began < 5
    assert first.lost[1:] == ["backward #5: rank(s) 1 ended before it (uneven inputs)"]
