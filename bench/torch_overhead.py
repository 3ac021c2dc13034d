"""T1: `gradcheck exec` on PyTorch training loops vs plain python (issue 27's goal: <= 1.2x).

    .venv-torch/bin/python bench/torch_overhead.py [--rounds 5]      (needs torch: `make test-torch` builds it)

Whole processes, wall time, warm kernel cache, alternating plain and audited runs (one unmeasured run of each
first); the medians and the median of the per-round ratios:

- T1a: gradcheck.examples.torch_warp_train --steps 1000: a torch model with a Warp kernel inside a
  torch.autograd.Function (the bridge watched), SGD;
- T1b: tests/programs/torch/pure_train.py --steps 3000: a pure-torch loop (no Warp), SGD;
- T1c: bench/programs/torch_data_loop.py --steps 3000: a pure-torch loop written through ``.data`` and
  ``.numpy()`` (a hand-written SGD step, a clip, a norm logged between forward and backward).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from exec_overhead import measure  # the same alternation, warm-up and medians as E1

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = {
    "T1a torch + Warp kernel, 1,000 steps": ["-m", "gradcheck.examples.torch_warp_train", "--steps", "1000"],
    "T1b pure torch, 3,000 steps": [str(ROOT / "tests/programs/torch/pure_train.py"), "--steps", "3000"],
    "T1c torch through .data, 3,000 steps": [str(ROOT / "bench/programs/torch_data_loop.py"), "--steps", "3000"],
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    for name, program in PROGRAMS.items():
        r = measure(rounds, program, ("--output", "/dev/null"), cwd=str(ROOT))
        print(
            f"{name}: python {r['python']:.2f} s, gradcheck exec {r['exec']:.2f} s, ratio {r['ratio']:.3f}x "
            f"(rounds {', '.join(f'{x:.3f}' for x in r['rounds'])})"
        )


if __name__ == "__main__":
    main()
