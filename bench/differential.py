"""P1w and P6: gradcheck's cost per pass as a user sees it, from outside, as a whole-process differential.

    python bench/differential.py [--rounds 3]

For each scenario, `gradcheck run SPEC --passes N --format json --quiet` and the bare loop over the public
contract (bench/bare_loop.py) run as fresh processes at N = 10 and N = 70; (t70 - t10) / 60 is the cost of one
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
# label → (spec, extra options). The large param as the issue measured it: without the finite-difference and
# replay probes, whose one-off cost (124 rollouts of a 16M-float forward) would drown the per-pass differential.
SCENARIOS = {
    "cartpole": ("cartpole", []),
    "large-param (16,777,216 floats), --fd off --no-replay": (
        str(HERE / "large_param.py"),
        ["--fd", "off", "--no-replay"],
    ),
}


def wall(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=HERE.parent)
    return time.perf_counter() - started


LOW, HIGH = 10, 70  # 60 passes apart: a fresh process's wall time varies by ~0.2 s, ~3 ms a pass at this spread


def per_pass(command) -> float:
    return (wall(command(HIGH)) - wall(command(LOW))) / (HIGH - LOW)


def measure(rounds: int = 3, only: str | None = None) -> dict:
    """label → {"checked": s, "bare": s, "ratio": median, "rounds": [...]}: seconds per pass, medians."""
    gradcheck = str(Path(sys.executable).parent / "gradcheck")
    results = {}
    for label, (spec, extra) in SCENARIOS.items():
        if only and only not in label:
            continue

        def checked(n, spec=spec, extra=extra):
            return [
                gradcheck,
                "run",
                spec,
                "--passes",
                str(n),
                "--format",
                "json",
                "--quiet",
                "--device",
                "cpu",
                *extra,
            ]

        def bare(n, spec=spec):
            return [sys.executable, str(HERE / "bare_loop.py"), spec, "--passes", str(n), "--device", "cpu"]

        wall(checked(2)), wall(bare(2))  # warm the kernel cache
        samples = []
        for round_ in range(rounds):  # which of the two goes first alternates, so a drift of the machine cancels
            if round_ % 2:
                b = per_pass(bare)
                samples.append((per_pass(checked), b))
            else:
                samples.append((per_pass(checked), per_pass(bare)))
        ratios = [c / b for c, b in samples]
        results[label] = {
            "checked": statistics.median(c for c, _ in samples),
            "bare": statistics.median(b for _, b in samples),
            "ratio": statistics.median(ratios),
            "rounds": ratios,
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default=None, help="run the scenarios whose label contains this")
    args = parser.parse_args()
    for label, r in measure(args.rounds, args.only).items():
        print(
            f"{label}: gradcheck {1000 * r['checked']:.1f} ms vs bare {1000 * r['bare']:.1f} ms a pass, ratio "
            f"{r['ratio']:.3f}× (rounds {', '.join(f'{x:.3f}' for x in r['rounds'])})"
        )


if __name__ == "__main__":
    main()
