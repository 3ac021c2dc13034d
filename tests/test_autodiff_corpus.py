"""Issue 40's corpus of third-party autodiff programs, run unmodified under ``gradcheck exec`` and held to a careful
reading and to an independent finite-difference check (slow lane).

The programs and why each was chosen are listed in docs/real-programs.md ("Third-party autodiff corpus"), written
before any of them was run under gradcheck. warp-nn's layers (tile GEMMs whose K-chunk loop runs a trip count read
at run time; softmax, normalisation, pooling and convolution loops over run-time extents) come from the pinned
package in ``.venv-thirdparty`` (the Makefile's ``THIRDPARTY_PACKAGES``); the Accelerated Computing Hub's
differentiable Navier-Stokes solvers (tile FFTs; a ``@wp.struct`` groups the FFT scratch arrays on the Python side,
its fields, not the struct, are the kernels' arguments) are vendored, unmodified,
in tests/corpus/autodiff/acc_hub_navier_stokes/. warpSPHCore's SPH density operator (pinned package too) passes a
``@wp.struct`` instance (the particles' arrays as fields) to the kernel it differentiates through its own ``wp.Tape``
inside a ``torch.autograd.Function``, so it runs on the PyTorch lane's interpreter (``Program.interpreter``; skipped
where ``make test-torch`` has not created it). warp-jsb's flight model (pinned) passes its ``AeroModelHandles``
struct instance to the RK4 step; the package differentiates nothing itself and integrates in place, so that driver
writes the RK4 step out of place around the package's own ``compute_full_dynamics_derivative`` (its docstring says
so). The other drivers in tests/programs/autodiff_corpus/ only choose sizes, steps and the CPU.

Each program runs under plain ``python`` and under ``gradcheck exec --format json --output FILE`` (whose default
adjoint test replays the first launch of each kernel): exit status and stdout must be the same (the drivers print
the trained parameters' sums) and the warning/error findings exactly those signed below. Triage (warp-nn 0.4.1,
warp-lang 1.19): nothing true in warp-nn's or the hub's programs, one true warning in warpSPHCore's (its torch bridge
zeroes the gradient torch hands it, see its entry), and the finite-difference checks agree (every direction, see
``test_corpus_gradient_agrees_with_central_differences``), so any other warning or error here is false.
``GRADCHECK_CORPUS_BLAME=1`` adds ``--blame`` (every launch of backward 1: the preview of the default adjoint test).

Silence counts only where kernels were tested: ``test_corpus_default_adjoint_test_covers_the_gradient_path`` requires
every kernel on each program's gradient path (read from its code, ``Program.gradient_path``) to have been tested.
Every program passes it (nothing here is xfail), the two Navier-Stokes solvers included: their RK steps are joined by
``wp.copy``, which the tape records as a ``record_func`` entry, not a launch, and the adjoint test's gradient path
(gradcheck.rerun.launch_check.gradient_path) follows those copies' edges, so their kernels stay on it; a regression
that loses them fails here.
"""

from __future__ import annotations

import json
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
# the PyTorch lane's interpreter (make test-torch), gradcheck installed in it
TORCH_PYTHON = ROOT / ".venv-torch" / "bin" / "python"
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
    # the kernels on the program's gradient path (by reading it), each with how many distinct kernels of that name
    # (warp-nn's layer factories all name theirs ``_create_kernels__locals__kernel``): the default adjoint test must
    # test them (any status but not-checked)
    gradient_path: tuple[tuple[str, int], ...] = ()
    # the Python that runs it (plain and ``-m gradcheck exec``) when not this one: the PyTorch lane's for torch programs
    interpreter: Path | None = None


def _wnn(name: str, *path: str) -> Program:
    """A warp-nn driver; ``path``: its gradient path's kernels, ``NAME`` or ``NAME*COUNT``."""
    kernels = tuple((k.split("*")[0], int(k.split("*")[1]) if "*" in k else 1) for k in path)
    return Program(
        name.replace("_", "-"), PROGRAMS_DIR / f"{name}.py", (THIRDPARTY,), ("warp_nn",), gradient_path=kernels
    )


LAYER = "_create_kernels__locals__kernel"  # every warp-nn layer factory's kernel name (Linear, Conv*, LSTM, GRU, RNN)
NORM = ("_partial_sums_kernel", "_average_kernel", "_partial_squares_kernel", "_normalize_kernel")
# the Navier-Stokes solvers: one RK substep = Poisson solve (complex copy, row FFT, tile transpose, column FFT,
# 1/k^2, inverse FFTs, real part) + the update; every kernel is on the path from the initial vorticity to the loss
POISSON = ("fft_tiled", "tiled_transpose", "multiply_k2_inverse", "ifft_tiled")
PROGRAMS = [
    # _copy_2d (the final hidden state h_n, which the loss does not read) is off the path in the recurrent ones
    _wnn("wnn_mlp", LAYER, "create_unary_kernels__locals__kernel_2d", "mse_loss"),
    _wnn("wnn_lstm", LAYER, "mse_loss"),
    _wnn("wnn_gru", LAYER, "mse_loss"),
    _wnn("wnn_rnn", LAYER, "mse_loss"),
    _wnn(
        "wnn_conv2d",
        f"{LAYER}*2",  # Conv2D's and Linear's
        "gather_kernel",
        "create_unary_kernels__locals__kernel_2d",
        "_sum_exp_kernel",
        "_log_softmax_kernel",
        "nll_loss",
    ),
    _wnn(
        "wnn_layernorm",
        LAYER,
        *NORM,
        "create_unary_kernels__locals__kernel_2d",
        "_sum_exp_kernel",
        "_softmax_kernel",
        "soft_cross_entropy",
    ),
    _wnn(
        "wnn_conv1d_batchnorm",
        f"{LAYER}*2",  # Conv1D's and Linear's
        *NORM,
        "create_unary_kernels__locals__kernel_3d",
        "avg_pool_kernel",
        "mse_loss",
    ),
    _wnn("wnn_rmsnorm", LAYER, *NORM, "create_unary_kernels__locals__kernel_2d", "mse_loss"),
    # FFT scratch arrays grouped per Poisson solve in a struct (a Python-side holder: the kernels get its fields),
    # tile FFTs: nothing true, FD agrees
    Program(
        "acc-hub-perturbation",
        PROGRAMS_DIR / "acc_hub_perturbation.py",
        (ACC_HUB,),
        gradient_path=tuple(
            (k, 1)
            for k in (
                "add_perturbation",
                "copy_float_to_complex",
                *POISSON,
                "extract_real_and_normalize",
                "rk3_substep",
                "compute_neg_mse",
            )
        ),
    ),
    # the tutorial's logo solver on the vendored copy (tests/test_thirdparty.py runs it on an unpacked snapshot and
    # records its central differences); its driver is that test's. Nothing true.
    Program(
        "acc-hub-logo",
        TESTS / "programs" / "thirdparty" / "acc_hub_vorticity_logo.py",
        (ACC_HUB, THIRDPARTY),
        ("PIL", "scipy"),
        fd=False,
        gradient_path=tuple(
            (k, 1)
            for k in (
                "copy_float_to_vec2",
                *POISSON,
                "extract_real_and_scale",
                "compute_rhs_kernel",
                "rk3_update_kernel",
                "compute_loss_kernel",
            )
        ),
    ),
    # warpSPHCore's density operator: a particleDataSoA_2 @wp.struct INSTANCE (positions, masses, ... as fields) is
    # the kernel's query and reference argument inside the package's own wp.Tape, run from torch's backward by its
    # StateAwareWarpFunction; the neighbour loop's trip count is read at run time. FD agrees (positions and masses).
    Program(
        "wsph-density",
        PROGRAMS_DIR / "wsph_density.py",
        (THIRDPARTY,),
        ("warpSPHCore",),
        # TRUE (latent here: the driver's loss gives each operator output its own gradient tensor): backward seeds
        # the tape with a zero-copy view of grad_output and ends with tape.zero(), which zeroes grad_output in place,
        # so where torch hands one tensor to two nodes the later one gets zeros: loss ((r1 + r2) * w).sum() over two
        # density calls gives the first call's masses a zero gradient, (r1 * w).sum() + (r2 * w).sum() does not
        true=(("torch-bridge", "warning", r"StateAwareWarpFunction\.backward"),),
        gradient_path=(("computeSPHDensity_Kernel", 1),),
        interpreter=TORCH_PYTHON,
    ),
    # warp-jsb's flight model: the AeroModelHandles @wp.struct INSTANCE (26 lookup tables as fields, two of them
    # fitted) is an argument of rk4_step, which calls the package's compute_full_dynamics_derivative 4 times per step
    # on arrays of AircraftState structs; the contact loop's trip count is len(contacts) (0: airborne). FD agrees.
    Program(
        "jsb-prop-tables",
        PROGRAMS_DIR / "jsb_prop_tables.py",
        (THIRDPARTY,),
        ("warp_jsb",),
        gradient_path=(("rk4_step", 1), ("trajectory_misfit", 1)),
    ),
]


def _env(program: Program) -> dict[str, str]:
    extra = os.pathsep.join(str(p) for p in program.path)
    inherited = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": f"{extra}{os.pathsep}{inherited}" if inherited else extra}


def _missing(program: Program) -> str | None:
    import importlib.machinery
    import importlib.util

    if program.interpreter is not None and not program.interpreter.exists():
        return f"{program.id} runs on {program.interpreter} (make test-torch creates it)"
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
        [str(program.interpreter or sys.executable), *argv],
        capture_output=True,
        text=True,
        cwd=str(cwd),
        env=env,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    return proc, time.perf_counter() - started


@dataclass(frozen=True)
class Runs:
    """One program's run under python and under exec, and exec's report (read by both tests below)."""

    plain: subprocess.CompletedProcess
    audited: subprocess.CompletedProcess
    report_file: Path


_RUNS: dict[str, Runs] = {}  # program id → its runs: each program runs once per session, whichever test asks first


def _runs(program: Program, tmp_path_factory) -> Runs:
    if program.id in _RUNS:
        return _RUNS[program.id]
    base = tmp_path_factory.mktemp(program.id)
    cwd = base / "cwd"
    cwd.mkdir()
    report_file = base / "report.json"
    plain, t_plain = _python(program, [str(program.script)], cwd)
    started = time.perf_counter()
    exec_args = ["exec", *(["--blame"] if BLAME else []), "--format", "json", "--output", str(report_file)]
    if program.interpreter is None:
        audited = cli(*exec_args, str(program.script), env=_env(program), cwd=cwd, timeout=TIMEOUT)
    else:  # the same CLI, from the program's own interpreter (gradcheck is installed there too)
        audited, _ = _python(program, ["-m", "gradcheck", *exec_args, str(program.script)], cwd)
    t_exec = time.perf_counter() - started
    print(
        f"\n[autodiff-corpus] {program.id}: python {t_plain:.1f} s, exec{' --blame' if BLAME else ''} "
        f"{t_exec:.1f} s, exit {plain.returncode} -> {audited.returncode}"
    )
    _RUNS[program.id] = Runs(plain, audited, report_file)
    return _RUNS[program.id]


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.id for p in PROGRAMS])
def test_corpus_program_runs_the_same_under_exec(program: Program, tmp_path_factory):
    if reason := _missing(program):
        pytest.skip(reason)
    runs = _runs(program, tmp_path_factory)
    plain = runs.plain
    scenario, problems = run_problems(plain, runs.audited, runs.report_file)
    if plain.returncode != 0:
        problems.insert(0, f"the program itself failed under python ({plain.returncode}):\n{plain.stderr[-3000:]}")
    if scenario is not None:
        if not scenario.get("passes"):
            problems.append("the report audited no backward: the program's tapes were not seen")
        problems.extend(triage_problems(scenario, plain.returncode, program.true, program.may))
    if problems:
        pytest.fail(f"{program.id} ({program.script.name}):\n\n" + "\n\n".join(problems), pytrace=False)


def _tested_kernels(scenario: dict) -> tuple[dict[str, int], dict[str, dict]]:
    """(kernel name → its launches the default adjoint test tested, any status but not-checked; kernel name → why
    its launches were not checked), from a report's ``blame`` section."""
    tested: dict[str, int] = {}
    untested: dict[str, dict] = {}
    for row in (scenario.get("blame") or {}).get("kernels", []):
        count = sum(n for status, n in row["statuses"].items() if status != "not-checked")
        tested[row["kernel"]] = tested.get(row["kernel"], 0) + count
        if row.get("not_checked"):
            untested[row["kernel"]] = row["not_checked"]
    return tested, untested


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.id for p in PROGRAMS])
def test_corpus_default_adjoint_test_covers_the_gradient_path(program: Program, tmp_path_factory):
    """Silence is only worth something when kernels were tested: every kernel on the program's gradient path (by
    reading it: ``Program.gradient_path``) must have been tested by exec's default adjoint test, so that a regression to
    "nothing checked" (the gradient path lost through a view, a second seed or a recorded copy) fails here."""
    if reason := _missing(program):
        pytest.skip(reason)
    runs = _runs(program, tmp_path_factory)
    try:
        (scenario,) = json.loads(runs.report_file.read_text())["scenarios"]
    except (OSError, ValueError, KeyError) as exc:
        pytest.fail(f"{program.id}: no valid JSON report ({exc!r})\n{runs.audited.stderr[-3000:]}", pytrace=False)
    tested, untested = _tested_kernels(scenario)
    short = [
        f"{name}: {tested.get(name, 0)} of {count} tested"
        + (f" (not checked: {untested[name]})" if name in untested else "")
        for name, count in program.gradient_path
        if tested.get(name, 0) < count
    ]
    assert not short, (
        f"{program.id}: the default adjoint test left kernels on the gradient path untested:\n  "
        + "\n  ".join(short)
        + f"\nblame note: {(scenario.get('blame') or {}).get('note')}"
    )


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
