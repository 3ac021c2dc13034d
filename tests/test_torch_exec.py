"""``gradcheck exec`` on PyTorch programs: each ``loss.backward()`` audited as a ``tape.backward`` is, and the
torch<->Warp bridge. Every mistake is proven against torch's own gradients (the programs' ``--check``), fires
here, and its clean twin stays silent, correct programs that accumulate on purpose included.

These need torch, an optional extra: ``make test-torch`` runs them in a virtual environment with it (CI does,
in its own lane); ``make test`` skips them. The programs run as a user runs them, in a subprocess, in parallel
at module start (each with a deadline).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

torch = pytest.importorskip("torch", reason="torch is an optional extra: `make test-torch` runs these tests")

from conftest import ROOT, TESTS, exec_json  # noqa: E402

PROGRAMS = TESTS / "programs" / "torch"
EXAMPLE = ("-m", "gradcheck.examples.torch_warp_train")
DEADLINE = 300
# the first test's deadline covers the module's fixture: some 50 programs under exec, three at a time (minutes),
# each bounded by DEADLINE; not the suite's 600 s
pytestmark = pytest.mark.timeout(1800)

# fault -> the findings it must give: (check, severity, subject)
EXAMPLE_FAULTS = {
    "doubled-gradient": {("torch-bridge", "error", "model.scale.grad")},
    "orphaned-alias": {("torch-bridge", "error", "model.scale.grad")},
    "grad-output-zeroed": {("torch-bridge", "error", "WarpScaledTanh.backward grad_output")},
    "tape-reused": {("torch-bridge", "error", "ctx.scale.grad"), ("torch-bridge", "error", "ctx.h.grad")},
    "detached-input": {("missing-gradient", "error", "model.scale.grad")},
    "no-zero-grad": {("accumulation", "error", f"model.{p}.grad") for p in ("scale", "encoder.weight", "head.bias")},
    "missed-boundary": {("accumulation", "error", f"model.{p}.grad") for p in ("scale", "encoder.weight")},
    "read-after-step": {("mutated-gradient", "error", f"model.{p}.grad") for p in ("scale", "head.weight")},
}
PURE_CASES = {
    "no-zero-grad": {("accumulation", "error", "model.encoder.weight.grad")},
    "missed-boundary": {("accumulation", "error", "model.head.bias.grad")},
    "unused-in-optimizer": {("missing-gradient", "error", "model.aux.weight.grad")},
    "frozen-aux": {("missing-gradient", "info", "model.aux.weight.grad")},
    "nan": {("nonfinite", "error", "model.encoder.weight.grad")},
    "explode": {("explosion", "error", "model.head.weight.grad")},
    "detached": {("missing-gradient", "error", "model.encoder.weight.grad")},
    "read-after-step": {("mutated-gradient", "error", "model.encoder.bias.grad")},
}
SILENT = {
    "example-clean": (*EXAMPLE,),
    "example-accumulates-on-purpose": (*EXAMPLE, "--accumulate", "4"),
    "pure-clean": (str(PROGRAMS / "pure_train.py"),),
    "pure-accumulates-on-purpose": (str(PROGRAMS / "pure_train.py"), "--case", "accumulate"),
    **{f"twin-{c}": (str(PROGRAMS / "bridge_twins.py"), "--case", c) for c in ("alias-write", "cached-keep-grad", "reused-zeroed")},
}  # fmt: skip
# correct programs of common patterns, written by a second reader to catch false findings (GradScaler, GANs zeroed
# by hand, two optimizers at two speeds, frozen layers in the optimizer, sparse and complex gradients, threads, a
# program's own TorchFunctionMode, LBFGS, checkpointing, DDP, torch.compile, Warp Functions made afresh); q*: twenty
# torch training programs with Warp Functions, one feature each (docs/real-programs.md lists them)
CORRECT = sorted(p.stem for p in (PROGRAMS / "correct").glob("[pbqw]*.py"))
LONG = (str(PROGRAMS / "pure_train.py"), "--case", "no-zero-grad", "--steps", "400", "--from-step", "300")


def _exec(args: tuple[str, ...]):
    return exec_json(*args, env={"WARP_DEVICE": "cpu"}, timeout=DEADLINE)


def _runs() -> dict:
    jobs = {f"example-{f}": (*EXAMPLE, "--fault", f) for f in EXAMPLE_FAULTS}
    jobs |= {f"pure-{c}": (str(PROGRAMS / "pure_train.py"), "--case", c) for c in PURE_CASES}
    jobs |= {"twin-grad-output-private": (str(PROGRAMS / "bridge_twins.py"), "--case", "grad-output-private")}
    jobs |= SILENT | {"long": LONG}
    jobs |= {f"correct-{name}": (str(PROGRAMS / "correct" / f"{name}.py"),) for name in CORRECT}
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {name: pool.submit(_exec, args) for name, args in jobs.items()}
    return {name: f.result() for name, f in futures.items()}


@pytest.fixture(scope="module")
def runs():
    return _runs()


def _found(scenario) -> set:
    return {(f["check"], f["severity"], f["subject"]) for f in scenario["findings"]}


def _errors_outside(scenario, checks: set) -> list:
    return [f for f in scenario["findings"] if f["severity"] == "error" and f["check"] not in checks]


@pytest.mark.parametrize("fault", sorted(EXAMPLE_FAULTS))
def test_example_fault_is_found_where_it_is(runs, fault):
    proc, scenario = runs[f"example-{fault}"]
    assert proc.returncode == 1, proc.stderr[-2000:]
    expected = EXAMPLE_FAULTS[fault]
    assert expected <= _found(scenario), scenario["findings"]
    assert not _errors_outside(scenario, {c for c, _s, _p in expected})


@pytest.mark.parametrize("case", sorted(PURE_CASES))
def test_pure_torch_mistake_is_found(runs, case):
    proc, scenario = runs[f"pure-{case}"]
    expected = PURE_CASES[case]
    assert expected <= _found(scenario), scenario["findings"]
    assert not _errors_outside(scenario, {c for c, _s, _p in expected} | {"nonfinite"})
    assert proc.returncode == (0 if all(s == "info" for _c, s, _p in expected) else 1)


@pytest.mark.parametrize("name", sorted(SILENT))
def test_correct_program_is_silent(runs, name):
    proc, scenario = runs[name]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert scenario["findings"] == [], scenario["findings"]
    assert scenario["passes"] > 0 and scenario["params"], scenario


@pytest.mark.parametrize("name", CORRECT)
def test_common_correct_patterns_get_no_warning(runs, name):
    proc, scenario = runs[f"correct-{name}"]
    assert proc.returncode == 0, proc.stderr[-2000:]
    loud = [f for f in scenario["findings"] if f["severity"] in ("error", "warning")]
    assert not loud, loud


def test_subjects_are_the_programs_parameter_paths(runs):
    _proc, scenario = runs["example-clean"]
    subjects = {p["subject"] for p in scenario["params"]}
    assert {"model.scale.grad", "model.encoder.weight.grad", "model.head.bias.grad"} <= subjects
    assert not [s for s in subjects if "array#" in s or s.startswith(("ctx.", "self."))], subjects


def test_the_causes_name_the_line_and_the_fix(runs):
    detached = next(f for f in runs["example-detached-input"][1]["findings"] if f["check"] == "missing-gradient")
    assert detached["evidence"]["break"]["cause"] == "detached"
    assert "torch_warp_train.py:" in detached["message"] and "wp.from_torch" in detached["hint"]
    unused = next(f for f in runs["pure-unused-in-optimizer"][1]["findings"] if f["check"] == "missing-gradient")
    assert unused["evidence"]["break"]["cause"] == "unreached"
    doubled = next(f for f in runs["example-doubled-gradient"][1]["findings"] if f["check"] == "torch-bridge")
    assert re.search(r"wp\.to_torch at torch_warp_train\.py:\d+", doubled["message"])
    step = next(f for f in runs["example-read-after-step"][1]["findings"] if f["check"] == "mutated-gradient")
    assert "RescalingSGD.step()" in step["message"] and "Tensor.norm (torch_warp_train.py:" in step["message"]
    nan = next(f for f in runs["pure-nan"][1]["findings"] if f["check"] == "nonfinite")
    assert nan["evidence"]["loss_finite"] is False and "detect_anomaly" in nan["hint"]
    boundary = next(f for f in runs["pure-missed-boundary"][1]["findings"] if f["check"] == "accumulation")
    assert "optimizer.zero_grad()" in boundary["hint"] and "SGD.step() (pure_train.py:" in boundary["hint"]


def test_grad_output_written_but_read_by_no_one_else_is_a_warning(runs):
    proc, scenario = runs["twin-grad-output-private"]
    assert proc.returncode == 0
    assert _found(scenario) == {("torch-bridge", "warning", "Square.backward grad_output")}
    grad_output = runs["example-grad-output-zeroed"][1]["findings"][0]
    assert grad_output["evidence"]["shared"] is True and "AddmmBackward0" in grad_output["message"]


def test_a_long_loop_is_audited_by_the_cadence_and_the_late_mistake_found(runs):
    _proc, scenario = runs["long"]
    assert scenario["passes"] == 400
    sampling = scenario["sampling"]
    assert sampling["audited"] < 200 and sampling["backwards"] == 400
    first = {f["evidence"]["first_iteration"] for f in scenario["findings"] if f["check"] == "accumulation"}
    assert first and min(first) > 300


# the proofs: each fault really corrupts the gradients; the clean program matches torch's own
@pytest.mark.parametrize(
    "fault", ["doubled-gradient", "orphaned-alias", "grad-output-zeroed", "tape-reused", "detached-input"]
)
def test_each_bridge_fault_is_a_real_gradient_error(fault):
    from gradcheck.examples.torch_warp_train import check

    assert check(fault) > 0.1


def test_the_clean_example_matches_torch():
    from gradcheck.examples.torch_warp_train import check

    assert check(None) < 1e-5


@pytest.mark.parametrize(
    "case,wrong", [("alias-write", False), ("cached-keep-grad", False), ("reused-zeroed", False),
                   ("grad-output-private", False), ("doubled", True)],
)  # fmt: skip
def test_the_twins_gradients_against_torch(case, wrong):
    _assert_proven("bridge_twins.py", case, wrong)


@pytest.mark.parametrize(
    "case,wrong", [("clean", False), ("accumulate", False), ("no-zero-grad", True), ("missed-boundary", True)]
)
def test_the_pure_accumulation_cases_against_a_fresh_model(case, wrong):
    _assert_proven("pure_train.py", case, wrong)


def _assert_proven(program: str, case: str, wrong: bool) -> None:
    """``PROGRAM --case CASE --check`` prints its gradients' largest relative difference from a correct computation:
    beyond 0.1 for a mistake, below 1e-5 for a correct case."""
    proc = subprocess.run(
        [sys.executable, str(PROGRAMS / program), "--case", case, "--check"],
        capture_output=True, text=True, timeout=DEADLINE, cwd=str(ROOT),
    )  # fmt: skip
    difference = float(re.search(r"difference[^:]*: (\S+)", proc.stdout).group(1))
    assert (difference > 0.1) if wrong else (difference < 1e-5), proc.stdout


def test_the_in_process_api_audits_a_torch_loop():
    import gradcheck

    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)  # made before the audit: known from its first step
    results = {}
    for zero in (False, True):
        with gradcheck.audit(params={"w": model.weight}) as audit:
            for _ in range(5):
                model(torch.randn(8, 3)).pow(2).mean().backward()
                optimizer.step()
                if zero:
                    optimizer.zero_grad()
        results[zero] = {(f.check, f.subject) for f in audit.report.scenarios[0].findings}
        optimizer.zero_grad()
    assert results[False] == {("accumulation", "w.grad"), ("accumulation", "model.bias.grad")}
    assert results[True] == set()


def test_a_torch_program_without_backward_says_there_was_nothing_to_audit(tmp_path):
    program = tmp_path / "infer.py"
    program.write_text("import torch\nprint(float(torch.ones(3).sum()))\n")
    proc, scenario = _exec((str(program),))
    assert proc.returncode == 0 and proc.stdout.startswith("3.0\n")
    assert scenario["passes"] == 0 and scenario["findings"] == []
    assert any("never called backward" in n for n in scenario["notes"]), scenario["notes"]


def test_the_twenty_feature_programs_match_torchs_own_gradients():
    """The q* programs of the correct corpus are correct: each ``--check`` compares every trainable gradient with
    the same model in pure torch (over two or three calls, so reused buffers are exercised) and fails past 1e-4."""
    programs = sorted((PROGRAMS / "correct").glob("q*.py"))

    def check(program):
        return subprocess.run(
            [sys.executable, str(program), "--check"], capture_output=True, text=True, timeout=DEADLINE,
            env={**os.environ, "WARP_DEVICE": "cpu"},
        )  # fmt: skip

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(zip(programs, pool.map(check, programs)))
    assert len(programs) == 20
    failed = {p.name: r.stderr[-500:] for p, r in results.items() if r.returncode != 0}
    assert not failed, failed
