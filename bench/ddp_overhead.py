"""T2: `gradcheck exec` under torchrun on a DDP job vs torchrun alone (issue 44's goal: <= 1.2x).

    .venv-torch/bin/python bench/ddp_overhead.py [--rounds 5] [--steps 1000] [--ranks 2]

tests/programs/torch/ddp_train.py (DistributedDataParallel over Linear -> a Warp Function -> Linear, gloo, SGD)
with N ranks on this machine, whole jobs, wall time, warm kernel cache, alternating plain and audited jobs (one
unmeasured job of each first); the medians and the median of the per-round ratios. The audited job runs every
rank under `gradcheck exec --output /dev/null`: the cross-rank checks compare each audited step across the ranks
through the job's store.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

from exec_overhead import wall

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PROGRAM = ROOT / "tests/programs/torch/ddp_train.py"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--ranks", type=int, default=2)
    args = parser.parse_args()
    os.environ["PATH"] = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    launcher = [str(BIN / "torchrun"), "--standalone", f"--nproc-per-node={args.ranks}"]
    program = [str(PROGRAM), "--steps", str(args.steps)]
    plain = [*launcher, *program]
    audited = [*launcher, "--no-python", "gradcheck", "exec", "--output", "/dev/null", *program]
    wall(plain), wall(audited)  # warm the kernel cache
    times = [(wall(plain), wall(audited)) for _ in range(args.rounds)]
    ratios = [a / p for p, a in times]
    print(
        f"T2 DDP, {args.ranks} ranks, {args.steps:,} steps: torchrun {statistics.median(p for p, _ in times):.2f} s, "
        f"under gradcheck exec {statistics.median(a for _, a in times):.2f} s, ratio {statistics.median(ratios):.3f}x "
        f"(rounds {', '.join(f'{x:.3f}' for x in ratios)})"
    )


if __name__ == "__main__":
    main()
