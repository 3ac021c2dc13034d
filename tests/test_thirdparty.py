"""Third-party autodiff code, neither Warp's nor Newton's, run under ``gradcheck exec`` and held to a careful reading.

tests/test_transparency.py holds gradcheck to Warp's and Newton's own programs. Here the gradients come from code
written elsewhere: skrl's reinforcement-learning agents for Warp (PPO, SAC, DDPG: several networks, several tapes
and optimizers per step, gradient-norm clipping, target networks updated outside any tape) on warp-nn's layers, and
the differentiable Navier-Stokes solver of NVIDIA's Accelerated Computing Hub tutorial (tile-FFT Poisson solves
whose scratch arrays are reused inside the taped rollout). None of that code is copied into this repository: the
programs in tests/programs/thirdparty/ are short drivers of ours, written against those projects' public APIs after
their own examples, and each docstring names the source, its licence and what the driver changes (sizes, steps,
device). The third-party packages live in ``.venv-thirdparty`` (ignored by git, like every ``.venv-*``), put on the
programs' PYTHONPATH only; ``make test-slow`` installs them there first, pinned (the Makefile's
``THIRDPARTY_PACKAGES``). The tutorial's ``helpers`` package is no package on an index: its case runs where
``.venv-thirdparty/acc_hub/tutorials/warp/notebooks`` holds that folder of NVIDIA/accelerated-computing-hub (commit
a776efd, Apache-2.0 code) and is skipped elsewhere, CI included. A program whose packages are missing is skipped,
saying which. ``GRADCHECK_THIRDPARTY`` names another folder.

Each program runs twice, under plain ``python`` (which also warms the kernel cache) and under ``gradcheck exec
--format json --output FILE``, and must come out the same: exit status (python 0 -> exec 0, or 1 only with an
error-level finding), stdout once timings and Warp's "(compiled)"/"(cached)" are normalised (the drivers print the
trained parameters' sums, so a gradient, optimizer state or random stream that gradcheck disturbed would show), and
stderr likewise; and the warning and error findings must be exactly those a careful reading of the program signs
(``true``, each with the reason; ``may`` for those that depend on uninitialised memory). Triage (skrl 2.1.1, warp-nn
0.4.1, warp-lang 1.19): the one true finding is skrl's own bug (an entropy accumulated into ``wp.empty``, on the
PPO path that skrl's example leaves off); otherwise gradcheck says nothing, also with ``--audit-every 1`` over 4x
longer runs (192 PPO, 1680 SAC and 1120 DDPG backwards), and silence is right: the Navier-Stokes gradient agrees
with central differences along random directions, so reusing the FFT scratch (linear transforms) is harmless.
Slow lane: about 20 s on 2 cores with a warm kernel cache.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT, TESTS, cli
from test_transparency import run_problems, triage_problems

TIMEOUT = 600  # seconds per run; a cold kernel cache compiles skrl's and warp-nn's modules first (about 20 s)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2 * TIMEOUT + 60)]

PROGRAMS_DIR = TESTS / "programs" / "thirdparty"
THIRDPARTY = Path(os.environ.get("GRADCHECK_THIRDPARTY", ROOT / ".venv-thirdparty"))
ACC_HUB_NOTEBOOKS = THIRDPARTY / "acc_hub" / "tutorials" / "warp" / "notebooks"
# the versions whose code was read for the triage: elsewhere only the transparency half is asserted
TRIAGED = {"warp-lang": "1.19.", "skrl": "2.1.1", "warp-nn": "0.4.1"}
SKRL = ("skrl", "warp_nn", "gymnasium", "tensorboard")


@dataclass(frozen=True)
class Program:
    id: str
    script: str
    args: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()  # modules the program imports besides warp and numpy
    true: tuple[tuple[str, str, str], ...] = ()  # (check, severity, subject regex): the findings triaged TRUE
    # true findings that depend on the contents of memory the program never initialised: allowed, not required
    may: tuple[tuple[str, str, str], ...] = ()


PROGRAMS = [
    # One tape per mini-batch (policy, value and the loss kernels), backward, clip-by-norm and Adam inside warp-nn's
    # optimizer.step, tape.zero(); the observations and the sampled actions get requires_grad (their gradients are
    # never read; tape.zero() clears them). Nothing true.
    Program("skrl-ppo", "skrl_ppo_pendulum.py", needs=SKRL),
    # The same agent on 4 synchronous environments with the entropy-loss kernel on the tape (skrl's example leaves
    # it off). MAY (true, a bug in skrl 2.1.1): GaussianMixin.get_entropy allocates entropy = wp.empty((1,)) and
    # its _entropy kernel wp.atomic_adds into it, so the entropy, and the loss, start from whatever the allocator
    # hands back: the loss read -2.07e16 on most backwards and NaN on others in plain python. The gradients are
    # right (the adjoint of the sum never sees the initial value), as the finding says; it fires only when the
    # bytes spell NaN, which depends on the allocations before (gradcheck's included). MAY too, the same bug seen
    # from the other side: when the bytes spell a huge number (loss -1.6e13 .. -1.7e23 in one CI run), every
    # gradient is below float32's resolution against that loss, and vanishing says the loss cannot see the params.
    Program(
        "skrl-ppo-vec-entropy",
        "skrl_ppo_pendulum.py",
        ("--num-envs", "4", "--entropy-scale", "0.01"),
        SKRL,
        may=(("nonfinite", "error", r"^loss$"), ("vanishing", "warning", r"\.grad$")),
    ),
    # KL early stopping: a mini-batch whose KL divergence passes 0.01 ends its epoch after its tape was recorded and
    # before any backward (24 of the 48 mini-batches run backward); the dropped tape is deliberate. Nothing true.
    Program("skrl-ppo-kl-early-stop", "skrl_ppo_pendulum.py", ("--kl-threshold", "0.01"), SKRL),
    # Three tapes a step. The policy tape runs through both critics, whose parameters receive gradient that no
    # optimizer consumes: deliberate (the policy loss needs dQ/da), and tape.zero() clears it before the next
    # critic backward. The targets come from target critics evaluated outside any tape. Nothing true.
    Program("skrl-sac", "skrl_sac_pendulum.py", needs=SKRL),
    # Critic tape then policy tape through the critic (same pattern as SAC); polyak updates outside. Nothing true.
    Program("skrl-ddpg", "skrl_ddpg_pendulum.py", needs=SKRL),
    # Each Poisson solve writes fft_temp_1/2/3 twice (forward FFT, then inverse FFT) within the taped rollout; the
    # transforms and the 1/k^2 scaling are linear, so no adjoint needs the overwritten values. Checked: the tape's
    # gradient matches central differences along 3 random directions (0.129 vs 0.121, -0.00476 vs -0.00465,
    # -0.0367 vs -0.0362 at h = 0.1; float32 noise dominates smaller steps). Nothing true.
    Program("acc-hub-vorticity-logo", "acc_hub_vorticity_logo.py", needs=("helpers", "PIL", "scipy")),
]


def _search_path() -> list[str]:
    return [str(THIRDPARTY), str(ACC_HUB_NOTEBOOKS)]


def _env() -> dict[str, str]:
    """The programs' environment: the third-party folders first on PYTHONPATH, then whatever was there."""
    extra = os.pathsep.join(_search_path())
    inherited = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": f"{extra}{os.pathsep}{inherited}" if inherited else extra}


def _missing(program: Program) -> str | None:
    for module in program.needs:
        if importlib.machinery.PathFinder.find_spec(module, _search_path()) is None and (
            importlib.util.find_spec(module) is None
        ):
            return f"{program.id} needs {module} (see this module's docstring: it is installed apart, not committed)"
    return None


def _installed(distribution: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, distributions, version

    for found in distributions(path=[str(THIRDPARTY)]):
        if found.metadata["Name"].lower().replace("_", "-") == distribution:
            return found.version
    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def _triaged_versions() -> bool:
    return all((_installed(name) or prefix).startswith(prefix) for name, prefix in TRIAGED.items())


def _python(program: Program, cwd: Path) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, **_env()}
    env.pop("FORCE_COLOR", None)
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(PROGRAMS_DIR / program.script), *program.args],
        capture_output=True,
        text=True,
        cwd=str(cwd),
        env=env,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    return proc, time.perf_counter() - started


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.id for p in PROGRAMS])
def test_thirdparty_program_runs_the_same_under_exec(program: Program, tmp_path):
    if reason := _missing(program):
        pytest.skip(reason)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    report_file = tmp_path / "report.json"

    plain, t_plain = _python(program, cwd)
    started = time.perf_counter()
    audited = cli(
        "exec",
        "--format",
        "json",
        "--output",
        str(report_file),
        str(PROGRAMS_DIR / program.script),
        *program.args,
        env=_env(),
        cwd=cwd,
        timeout=TIMEOUT,
    )
    t_exec = time.perf_counter() - started
    print(
        f"\n[thirdparty] {program.id}: python {t_plain:.1f} s, exec {t_exec:.1f} s, "
        f"exit {plain.returncode} -> {audited.returncode}"
    )

    scenario, problems = run_problems(plain, audited, report_file)
    if plain.returncode != 0:
        problems.insert(0, f"the program itself failed under python ({plain.returncode}):\n{plain.stderr[-3000:]}")

    if scenario is not None and _triaged_versions():
        if not scenario.get("passes"):
            problems.append("the report audited no backward: the program's tapes were not seen")
        problems.extend(triage_problems(scenario, plain.returncode, program.true, program.may))

    if problems:
        pytest.fail(
            f"{program.id} ({program.script} {' '.join(program.args)}):\n\n" + "\n\n".join(problems), pytrace=False
        )
