"""A1/A2: what exec's default adjoint test costs (issue 40), on Newton's diffsim examples and the third-party
autodiff corpus: whole processes, warm kernel cache, CPU time (user + system, as run_bench's rows).

    python bench/adjoint_test_cost.py [--rounds 3] [--base DIR] [--only ball,cloth,corpus]

Each round runs, back to back, the program under plain python, under ``gradcheck exec`` and under ``gradcheck exec
--no-adjoint-test`` (the same tree with the test off), and with ``--base DIR`` under ``gradcheck exec`` of another
checkout's ``gradcheck`` package (``git archive BASE gradcheck | tar -x -C DIR``: the code before the change). The
medians of each, the ratios to python, and the corpus median of the exec/python ratios are printed as Markdown rows.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "programs" / "autodiff_corpus"
THIRDPARTY = ROOT / ".venv-thirdparty"
ACC_HUB = ROOT / "tests" / "corpus" / "autodiff" / "acc_hub_navier_stokes"
NEWTON = ["-m", "newton.examples"]
EXAMPLES = {
    "ball": ([*NEWTON, "diffsim_ball", "--viewer", "null", "--device", "cpu", "--num-frames", "38"], ()),
    "cloth": ([*NEWTON, "diffsim_cloth", "--viewer", "null", "--device", "cpu", "--num-frames", "122"], ()),
}
WNN = (
    "wnn_mlp",
    "wnn_lstm",
    "wnn_gru",
    "wnn_rnn",
    "wnn_conv2d",
    "wnn_layernorm",
    "wnn_conv1d_batchnorm",
    "wnn_rmsnorm",
)


def corpus() -> dict:
    programs = {name: ([str(CORPUS / f"{name}.py")], (THIRDPARTY,)) for name in WNN}
    programs["acc_hub_perturbation"] = ([str(CORPUS / "acc_hub_perturbation.py")], (ACC_HUB,))
    return programs


def child(command: list[str], path: tuple = ()) -> float:
    """CPU seconds (user + system) of one fresh process and its children, from a probe process's getrusage."""
    probe = (
        "import resource, subprocess, sys; "
        "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
        "u = resource.getrusage(resource.RUSAGE_CHILDREN); print(u.ru_utime + u.ru_stime, r.returncode)"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, path), env.get("PYTHONPATH", "")]).strip(os.pathsep)
    out = subprocess.run([sys.executable, "-c", probe, *command], check=True, capture_output=True, text=True, env=env)
    cpu, status = out.stdout.split()
    if int(status) != 0:
        raise RuntimeError(f"{command} exited {status}")
    return float(cpu)


def measure(program: list[str], path: tuple, rounds: int, base: Path | None) -> dict:
    gradcheck = [sys.executable, "-m", "gradcheck", "exec", "--format", "json", "--output", os.devnull]
    variants = {
        "python": ([sys.executable, *program], path),
        "exec": ([*gradcheck, *program], path),
        "off": ([*gradcheck[:4], "--no-adjoint-test", *gradcheck[4:], *program], path),
    }
    if base is not None:
        variants["base"] = ([*gradcheck, *program], (base, *path))
    for command, where in variants.values():  # warm the kernel cache
        child(command, where)
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(rounds):
        for key, (command, where) in variants.items():
            times[key].append(child(command, where))
    return {key: statistics.median(values) for key, values in times.items()}


def row(label: str, m: dict) -> str:
    python = m["python"]
    base = f"; before (base) {m['base'] / python:.3f}× ({m['base']:.2f} s)" if "base" in m else ""
    return (
        f"| {label} | **{m['exec'] / python:.3f}×** ({m['exec']:.2f} s vs python {python:.2f} s); test off "
        f"{m['off'] / python:.3f}× ({m['off']:.2f} s){base} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--base", type=Path, default=None, help="a folder holding the gradcheck package before")
    parser.add_argument("--only", default="ball,cloth,corpus")
    args = parser.parse_args()
    chosen = args.only.split(",")
    print("| program | exec with the default adjoint test vs python (CPU time, medians) |\n|---|---|")
    for name, (program, path) in EXAMPLES.items():
        if name in chosen:
            print(
                row(
                    f"A1 `{' '.join(program[1:4])}` {program[-1]} frames",
                    measure(program, path, args.rounds, args.base),
                ),
                flush=True,
            )
    if "corpus" in chosen:
        ratios = {}
        for name, (program, path) in corpus().items():
            m = measure(program, path, args.rounds, args.base)
            ratios[name] = m
            print(row(f"A2 corpus `{name}`", m), flush=True)
        median = statistics.median(m["exec"] / m["python"] for m in ratios.values())
        off = statistics.median(m["off"] / m["python"] for m in ratios.values())
        before = statistics.median(m["base"] / m["python"] for m in ratios.values()) if args.base else None
        tail = f"; before (base) {before:.3f}×" if before is not None else ""
        print(f"| A2 corpus median ({len(ratios)} programs) | **{median:.3f}×**; test off {off:.3f}×{tail} |")


if __name__ == "__main__":
    main()
