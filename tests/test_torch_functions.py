"""Custom ``torch.autograd.Function``s tested against their own forward (issue 40, item 2).

A Warp-backed Function with a wrong backward (the tape's gradient returned scaled, the kernel's adjoint launched
with a wrong factor) is an adjoint-mismatch error naming the Function, and its correct twins are silent; each
program's ``--check`` proves its gradients wrong or right against torch's own. A pure-torch Function whose backward
is not its forward's derivative on purpose (a straight-through estimator, gradient reversal) is at most an info.
A forward that draws random numbers or writes a buffer gets no verdict, and the program prints exactly what it
prints under plain python: gradcheck's re-runs leave its random stream and its state alone.

torch is an optional extra: ``make test-torch`` runs these in its virtual environment.
"""

from __future__ import annotations

import os
import re
import runpy
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="torch is an optional extra: `make test-torch` runs these tests")

from conftest import ROOT, TESTS  # noqa: E402

PROGRAMS = TESTS / "programs" / "torch" / "functions"
pytestmark = pytest.mark.timeout(600)


def _audited(program: str, *argv: str, monkeypatch, capsys):
    """Run PROGRAM in this process under gradcheck.audit(): (its findings, the Function verdicts, its stdout)."""
    import gradcheck

    monkeypatch.syspath_prepend(str(PROGRAMS))
    monkeypatch.setattr(sys, "argv", [str(PROGRAMS / program), *argv])
    capsys.readouterr()
    with gradcheck.audit() as audit:
        runpy.run_path(str(PROGRAMS / program), run_name="__main__")
    verdicts = {v.kernel.split()[-1]: v for v in audit._audit.torch.functions.verdicts}
    return audit.findings, verdicts, capsys.readouterr().out


def _plain(program: str, *argv: str, monkeypatch, capsys) -> str:
    monkeypatch.syspath_prepend(str(PROGRAMS))
    monkeypatch.setattr(sys, "argv", [str(PROGRAMS / program), *argv])
    capsys.readouterr()
    runpy.run_path(str(PROGRAMS / program), run_name="__main__")
    return capsys.readouterr().out


def _loud(findings) -> list:
    return [f for f in findings if f.severity.label in ("error", "warning")]


@pytest.mark.parametrize("case", ["tape-scaled", "adjoint-factor"])
def test_a_wrong_warp_backed_backward_is_an_error_naming_the_function(case, monkeypatch, capsys):
    findings, verdicts, _out = _audited("warp_backward.py", "--case", case, monkeypatch=monkeypatch, capsys=capsys)
    (found,) = [f for f in findings if f.check == "adjoint-mismatch"]
    assert found.severity.label == "error"
    assert re.fullmatch(r"torch\.autograd\.Function WarpSinScale \(.*warp_backward\.py:\d+\)", found.subject)
    assert "fix the backward of torch.autograd.Function WarpSinScale" in found.hint
    assert verdicts["WarpSinScale"].status == "mismatch" and verdicts["WarpSinScale"].rel_error > 0.5
    assert not [f for f in _loud(findings) if f is not found]


@pytest.mark.parametrize("case", ["tape", "adjoint"])
def test_its_correct_twin_is_silent(case, monkeypatch, capsys):
    findings, verdicts, _out = _audited("warp_backward.py", "--case", case, monkeypatch=monkeypatch, capsys=capsys)
    assert verdicts["WarpSinScale"].status == "ok", verdicts
    assert verdicts["WarpSinScale"].note is None  # its backward runs Warp
    assert not [f for f in findings if f.check == "adjoint-mismatch"] and not _loud(findings), findings


@pytest.mark.parametrize("case,wrong", [("tape", False), ("adjoint", False), ("tape-scaled", True),
                                        ("adjoint-factor", True), ("reversed", True)])  # fmt: skip
def test_the_cases_gradients_against_torch(case, wrong, monkeypatch, capsys):
    out = _plain("warp_backward.py", "--case", case, "--check", monkeypatch=monkeypatch, capsys=capsys)
    difference = float(re.search(r"difference: (\S+)", out).group(1))
    assert (difference > 0.5) if wrong else (difference < 1e-5), out


def test_pure_torch_surrogate_gradients_are_at_most_an_info(monkeypatch, capsys):
    findings, verdicts, _out = _audited("surrogate.py", monkeypatch=monkeypatch, capsys=capsys)
    assert {name: v.status for name, v in verdicts.items()} == {
        "RoundSTE": "surrogate", "ReverseGrad": "surrogate", "Softplus": "ok",
    }  # fmt: skip
    infos = {f.subject.split(" (")[0] for f in findings if f.check == "adjoint-mismatch"}
    assert infos == {"torch.autograd.Function RoundSTE", "torch.autograd.Function ReverseGrad"}
    assert all("surrogate" in f.message for f in findings if f.check == "adjoint-mismatch")
    assert not _loud(findings), findings


def test_a_warp_backed_gradient_reversal_is_at_most_an_info(monkeypatch, capsys):
    findings, verdicts, _out = _audited(
        "warp_backward.py", "--case", "reversed", monkeypatch=monkeypatch, capsys=capsys
    )
    assert verdicts["WarpSinScale"].status == "surrogate" and "runs Warp" in verdicts["WarpSinScale"].note
    (found,) = [f for f in findings if f.check == "adjoint-mismatch"]
    assert found.severity.label == "info" and "surrogate" in found.message
    assert not _loud(findings), findings


def test_a_buffer_written_by_the_forward_gets_no_verdict_and_is_left_as_the_program_left_it(monkeypatch, capsys):
    plain = _plain("buffer_forward.py", monkeypatch=monkeypatch, capsys=capsys)
    findings, verdicts, out = _audited("buffer_forward.py", monkeypatch=monkeypatch, capsys=capsys)
    verdict = verdicts["WarpSinTracked"]
    assert verdict.status == "no-verdict" and "RUNNING" in verdict.note, verdict
    assert not [f for f in findings if f.check == "adjoint-mismatch"] and not _loud(findings), findings
    assert out == plain


def test_a_forward_that_draws_random_numbers_gets_no_verdict(monkeypatch, capsys):
    findings, verdicts, _out = _audited("random_forward.py", monkeypatch=monkeypatch, capsys=capsys)
    verdict = verdicts["WarpDropout"]
    assert verdict.status == "no-verdict" and "draws random numbers (torch's CPU generator)" in verdict.note
    assert not [f for f in findings if f.check == "adjoint-mismatch"] and not _loud(findings), findings


def test_under_exec_the_program_prints_the_numbers_plain_python_prints():
    """The random program as a user runs it: its losses and the random numbers it draws after each step are the
    same under ``gradcheck exec`` (whose test re-ran its forward) as under python."""
    env = {**os.environ, "WARP_DEVICE": "cpu"}
    program = str(PROGRAMS / "random_forward.py")
    plain = subprocess.run([sys.executable, program], capture_output=True, text=True, cwd=str(ROOT), env=env,
                           timeout=300, check=True).stdout  # fmt: skip
    audited = subprocess.run([sys.executable, "-m", "gradcheck", "exec", program], capture_output=True, text=True,
                             cwd=str(ROOT), env=env, timeout=300).stdout  # fmt: skip
    steps = [line for line in plain.splitlines() if line.startswith("step ")]
    assert len(steps) == 4
    assert [line for line in audited.splitlines() if line.startswith("step ")] == steps
