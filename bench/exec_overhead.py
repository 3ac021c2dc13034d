"""E1: `gradcheck exec` overhead on an unmodified Newton example, as a user sees it (whole process, wall time).

    python bench/exec_overhead.py [--rounds 5]

Alternates `python -m newton.examples diffsim_ball --viewer null --num-frames 3 --device cpu` and the same
under `gradcheck exec`, in fresh processes with a warm kernel cache (one unmeasured run of each first), and
prints the median of each and of the per-round ratio.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent
PROGRAM = ["-m", "newton.examples", "diffsim_ball", "--viewer", "null", "--num-frames", "3", "--device", "cpu"]


def wall(command: list[str], cwd: str | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd)
    return time.perf_counter() - started


def measure(rounds: int = 5, program: list[str] = PROGRAM, options: tuple = (), cwd: str | None = None) -> dict:
    """{"python": s, "exec": s, "ratio": median, "rounds": [...]} (medians over the rounds) of ``program`` plain and
    under ``gradcheck exec OPTIONS``, alternated."""
    plain = [sys.executable, *program]
    audited = [str(BIN / "gradcheck"), "exec", *options, *program]
    wall(plain, cwd), wall(audited, cwd)  # warm the kernel cache
    times = [(wall(plain, cwd), wall(audited, cwd)) for _ in range(rounds)]
    ratios = [a / p for p, a in times]
    return {
        "python": statistics.median(p for p, _ in times),
        "exec": statistics.median(a for _, a in times),
        "ratio": statistics.median(ratios),
        "rounds": ratios,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    r = measure(parser.parse_args().rounds)
    print(
        f"E1 diffsim_ball: python {r['python']:.2f} s, gradcheck exec {r['exec']:.2f} s, ratio {r['ratio']:.3f}× "
        f"(rounds {', '.join(f'{x:.3f}' for x in r['rounds'])})"
    )


if __name__ == "__main__":
    main()
