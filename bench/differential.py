"""P1w and P6: gradcheck's cost per pass as a user sees it, from outside, as a whole-process differential.

    python bench/differential.py [--rounds 3]

For each scenario, `gradcheck run SPEC --passes N --format json --quiet` and the bare loop over the public
contract (bench/bare_loop.py) run as fresh processes at N = 10 and N = 40; (t40 - t10) / 30 is the cost of one
more pass, setup, compile, the finite-difference and replay probes (once per run) cancelling out. The ratio of the
two per-pass costs is what gradcheck adds to every pass. Medians over the rounds; each round measures all four.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCENARIOS = {"cartpole": "cartpole", "large-param (16,777,216 floats)": str(HERE / "large_param.py")}


def wall(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=HERE.parent)
    return time.perf_counter() - started


def per_pass(command) -> float:
    return (wall(command(40)) - wall(command(10))) / 30


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    gradcheck = str(Path(sys.executable).parent / "gradcheck")
    for label, spec in SCENARIOS.items():

        def checked(n, spec=spec):
            return [gradcheck, "run", spec, "--passes", str(n), "--format", "json", "--quiet", "--device", "cpu"]

        def bare(n, spec=spec):
            return [sys.executable, str(HERE / "bare_loop.py"), spec, "--passes", str(n), "--device", "cpu"]

        wall(checked(2)), wall(bare(2))  # warm the kernel cache
        samples = [(per_pass(checked), per_pass(bare)) for _ in range(rounds)]
        ratios = [c / b for c, b in samples]
        print(
            f"{label}: gradcheck {1000 * statistics.median(c for c, _ in samples):.1f} ms vs bare "
            f"{1000 * statistics.median(b for _, b in samples):.1f} ms a pass, ratio {statistics.median(ratios):.3f}× "
            f"(rounds {', '.join(f'{r:.3f}' for r in ratios)})",
            flush=True,
        )


if __name__ == "__main__":
    main()
