"""E2: cost does not grow with training length: a small Warp training loop (bench/train_loop.py) of N backwards under
`gradcheck exec` and under plain `python`, for N = 1,000, 10,000 (and 100,000 with --long).

    python bench/long_training.py [--long]

Per-backward cost is the differential (t(N2) - t(N1)) / (N2 - N1), so start-up cancels; peak RSS comes from
/proc via getrusage of each fresh child process. Flat means: the per-backward cost of the later backwards is the
same as of the earlier ones, and exec's peak memory does not move with N (the observer keeps a bounded record).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

LOOP = str(Path(__file__).resolve().parent / "train_loop.py")


def run(command: list[str]) -> tuple[float, int]:
    """(wall seconds, peak RSS in MiB) of one fresh process."""
    probe = (
        "import resource, subprocess, sys, time; t = time.perf_counter(); "
        "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
        "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    out = subprocess.run([sys.executable, "-c", probe, *command], check=True, capture_output=True, text=True)
    seconds, rss = out.stdout.split()
    return float(seconds), int(rss) // 1024


def measure(sizes=(1000, 10000)) -> dict:
    plain = [sys.executable, LOOP, "--iterations"]
    audited = [sys.executable, "-m", "gradcheck", "exec", LOOP, "--iterations"]
    run([*plain, "10"]), run([*audited, "10"])  # warm the kernel cache
    rows = {}
    for n in sizes:
        rows[n] = {"python": run([*plain, str(n)]), "exec": run([*audited, str(n)])}
    first, last = sizes[0], sizes[-1]
    span = last - first
    per = {k: 1000 * (rows[last][k][0] - rows[first][k][0]) / span for k in ("python", "exec")}
    return {"rows": rows, "per_backward_ms": per, "ratio": per["exec"] / per["python"]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--long", action="store_true", help="also 100,000 backwards")
    sizes = (1000, 10000, 100000) if parser.parse_args().long else (1000, 10000)
    r = measure(sizes)
    for n, row in r["rows"].items():
        print(
            f"N={n}: python {row['python'][0]:.2f} s {row['python'][1]} MiB; exec {row['exec'][0]:.2f} s {row['exec'][1]} MiB"
        )
    p = r["per_backward_ms"]
    print(f"E2 per backward: python {p['python']:.3f} ms, exec {p['exec']:.3f} ms ({r['ratio']:.1f}x)")


if __name__ == "__main__":
    main()
