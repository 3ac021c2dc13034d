"""Issue 40's corpus of third-party autodiff programs, run unmodified under ``gradcheck exec`` and held to a careful
reading and to an independent finite-difference check (slow lane).

The programs and why each was chosen are listed in docs/real-programs.md ("Third-party autodiff corpus"), written
before any of them was run under gradcheck. warp-nn's layers (tile GEMMs whose K-chunk loop runs a trip count read
at run time; softmax, normalisation, pooling and convolution loops over run-time extents) come from the pinned
package in ``.venv-thirdparty`` (the Makefile's ``THIRDPARTY_PACKAGES``); the Accelerated Computing Hub's
differentiable Navier-Stokes solvers (tile FFTs; a ``@wp.struct`` of FFT scratch arrays) are vendored, unmodified,
in tests/corpus/autodiff/acc_hub_navier_stokes/. The drivers in tests/programs/autodiff_corpus/ only choose sizes,
steps and the CPU.

Each program runs under plain ``python`` and under ``gradcheck exec --format json --output FILE`` (whose default
adjoint test replays the first launch of each kernel): exit status and stdout must be the same (the drivers print
the trained parameters' sums) and the warning/error findings exactly those signed below. Triage (warp-nn 0.4.1,
warp-lang 1.19): nothing true in any program, and the finite-difference checks agree (every direction, see
``test_corpus_gradient_agrees_with_central_differences``), so any warning or error here is false.
``GRADCHECK_CORPUS_BLAME=1`` adds ``--blame`` (every launch of backward 1: the preview of the default adjoint test).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT, TESTS, cli
from test_transparency import run_problems, triage_problems

TIMEOUT = 600  # seconds per run: generous, a cold kernel cache compiles warp-nn's modules first
pytestmark = [pytest.mark.slow, pytest.mark.timeout(3 * TIMEOUT + 60)]

PROGRAMS_DIR = TESTS / "programs" / "autodiff_corpus"
FD_CHECK = PROGRAMS_DIR / "fd_checks" / "fd_check.py"
THIRDPARTY = Path(os.environ.get("GRADCHECK_THIRDPARTY", ROOT / ".venv-thirdparty"))
ACC_HUB = TESTS / "corpus" / "autodiff" / "acc_hub_navier_stokes"
BLAME = os.environ.get("GRADCHECK_CORPUS_BLAME", "") not in ("", "0")


@dataclass(frozen=True)
class Program:
    id: str
    script: Path
    path: tuple[Path, ...]  # the program's PYTHONPATH
    needs: tuple[str, ...] = ()  # modules it imports besides warp and numpy, looked up on ``path``
    fd: bool = True  # fd_checks/fd_check.py has an adapter for it
    true: tuple[tuple[str, str, str], ...] = ()  # (check, severity, subject regex) triaged TRUE
    may: tuple[tuple[str, str, str], ...] = ()


def _wnn(name: str) -> Program:
    return Program(name.replace("_", "-"), PROGRAMS_DIR / f"{name}.py", (THIRDPARTY,), ("warp_nn",))


PROGRAMS = [
    *(
        _wnn(name)
        for name in (
            "wnn_mlp",
            "wnn_lstm",
            "wnn_gru",
            "wnn_rnn",
            "wnn_conv2d",
            "wnn_layernorm",
            "wnn_conv1d_batchnorm",
            "wnn_rmsnorm",
        )
    ),
    # a struct of FFT scratch arrays per Poisson solve, tile FFTs: nothing true, FD agrees
    Program("acc-hub-perturbation", PROGRAMS_DIR / "acc_hub_perturbation.py", (ACC_HUB,)),
    # the tutorial's logo solver on the vendored copy (tests/test_thirdparty.py runs it on an unpacked snapshot and
    # records its central differences); its driver is that test's. Nothing true.
    Program(
        "acc-hub-logo",
        TESTS / "programs" / "thirdparty" / "acc_hub_vorticity_logo.py",
        (ACC_HUB, THIRDPARTY),
        ("PIL", "scipy"),
        fd=False,
    ),
]


def _env(program: Program) -> dict[str, str]:
    extra = os.pathsep.join(str(p) for p in program.path)
    inherited = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": f"{extra}{os.pathsep}{inherited}" if inherited else extra}


def _missing(program: Program) -> str | None:
    import importlib.machinery
    import importlib.util

    for module in program.needs:
        if importlib.machinery.PathFinder.find_spec(module, [str(p) for p in program.path]) is None and (
            importlib.util.find_spec(module) is None
        ):
            return f"{program.id} needs {module} (make test-slow installs it into {THIRDPARTY.name})"
    return None


def _python(program: Program, argv: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, **_env(program)}
    env.pop("FORCE_COLOR", None)
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, *argv],
        capture_output=True,
        text=True,
        cwd=str(cwd),
        env=env,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    return proc, time.perf_counter() - started


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.id for p in PROGRAMS])
def test_corpus_program_runs_the_same_under_exec(program: Program, tmp_path):
    if reason := _missing(program):
        pytest.skip(reason)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    report_file = tmp_path / "report.json"

    plain, t_plain = _python(program, [str(program.script)], cwd)
    started = time.perf_counter()
    options = ["--blame"] if BLAME else []
    audited = cli(
        "exec",
        *options,
        "--format",
        "json",
        "--output",
        str(report_file),
        str(program.script),
        env=_env(program),
        cwd=cwd,
        timeout=TIMEOUT,
    )
    t_exec = time.perf_counter() - started
    print(
        f"\n[autodiff-corpus] {program.id}: python {t_plain:.1f} s, exec{' --blame' if BLAME else ''} "
        f"{t_exec:.1f} s, exit {plain.returncode} -> {audited.returncode}"
    )

    scenario, problems = run_problems(plain, audited, report_file)
    if plain.returncode != 0:
        problems.insert(0, f"the program itself failed under python ({plain.returncode}):\n{plain.stderr[-3000:]}")
    if scenario is not None:
        if not scenario.get("passes"):
            problems.append("the report audited no backward: the program's tapes were not seen")
        problems.extend(triage_problems(scenario, plain.returncode, program.true, program.may))
    if problems:
        pytest.fail(f"{program.id} ({program.script.name}):\n\n" + "\n\n".join(problems), pytrace=False)


FD_PROGRAMS = [p for p in PROGRAMS if p.fd]


@pytest.mark.parametrize("program", FD_PROGRAMS, ids=[p.id for p in FD_PROGRAMS])
def test_corpus_gradient_agrees_with_central_differences(program: Program, tmp_path):
    """The independent truth the triage rests on: the tape's gradient of each program agrees with float64 central
    differences of its own float32 loss along 3 random directions (fd_checks/fd_check.py, no gradcheck in it)."""
    if reason := _missing(program):
        pytest.skip(reason)
    proc, seconds = _python(program, [str(FD_CHECK), program.script.stem], tmp_path)
    print(f"\n[autodiff-corpus fd] {program.id} ({seconds:.1f} s):\n{proc.stdout}")
    assert proc.returncode == 0, (
        f"{program.id}: the tape's gradient disagrees with central differences\n{proc.stdout}{proc.stderr[-2000:]}"
    )
    assert proc.stdout.count("AGREE") == 3, proc.stdout
