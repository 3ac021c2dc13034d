"""P1w, P1w-stock and P6: gradcheck's cost per pass as a user sees it, from outside, as a whole-process differential,
and how far it is from the physical limit.

    python bench/differential.py [--rounds 3] [--only P1w,P6]

For each scenario, `gradcheck run SPEC --passes N --format json --quiet` and the bare loop over the public
contract (bench/bare_loop.py) run as fresh processes at N = 10 and N = 70; (t70 - t10) / 60 is the cost of one
more pass, setup, compile, the finite-difference and replay probes (once per run) cancelling out. The ratio of the
two per-pass costs is what gradcheck adds to every pass. Medians over the rounds; each round measures all four.
The limit is the bare pass plus one read of each param's gradient (bench/read_limit.py): no per-pass bookkeeping
that looks at every gradient value can cost less.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# row key → (spec, --set options of setup(), gradcheck's own extra options, what). P1w is cartpole as the cost issue
# measured it (per-step solver scratch: the correct solver, no write-after-read findings); P1w-stock the stock
# cartpole. P6 without the finite-difference and replay probes, whose one-off cost (124 rollouts of a 16M-float
# forward) would drown the per-pass differential.
SCENARIOS = {
    "P1w": ("cartpole", ["scratch=per-step"], [], "cartpole T=100, `--set scratch=per-step`"),
    "P1w-stock": ("cartpole", [], [], "cartpole T=100, stock (solver scratch shared across steps)"),
    "P6": (
        str(HERE / "large_param.py"),
        [],
        ["--fd", "off", "--no-replay"],
        "large-param (16,777,216 floats), `--fd off --no-replay`",
    ),
}


def wall(command: list[str], ok=(0, 1)) -> float:
    """Wall seconds of ``command``; an exit status outside ``ok`` (gradcheck: 0 clean, 1 findings) is an error that
    names the command, since the time of a run that crashed is not a cost."""
    started = time.perf_counter()
    done = subprocess.run(command, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=HERE.parent)
    if done.returncode not in ok:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"{' '.join(command[:4])} ... exited {done.returncode}: {tail[0]}")
    return time.perf_counter() - started


LOW, HIGH = 10, 70  # 60 passes apart: a fresh process's wall time varies by ~0.2 s, ~3 ms a pass at this spread


def per_pass(command, ok=(0, 1)) -> float:
    return (wall(command(HIGH), ok) - wall(command(LOW), ok)) / (HIGH - LOW)


def commands(key: str, device: str = "cpu"):
    """(checked, bare): each a function of the pass count giving the command line of ``key``'s two processes."""
    spec, settings, extra, _ = SCENARIOS[key]
    sets = [arg for setting in settings for arg in ("--set", setting)]
    gradcheck = str(Path(sys.executable).parent / "gradcheck")

    def checked(n: int) -> list[str]:
        run = [gradcheck, "run", spec, "--passes", str(n), "--format", "json", "--quiet", "--device", device]
        return [*run, *sets, *extra]

    def bare(n: int) -> list[str]:
        return [sys.executable, str(HERE / "bare_loop.py"), spec, "--passes", str(n), "--device", device, *sets]

    return checked, bare


def read_limit(key: str, device: str = "cpu") -> dict:
    """bench/read_limit.py on ``key``'s scenario, in a fresh process (its arrays freed with it)."""
    spec, settings, _, _ = SCENARIOS[key]
    sets = [arg for setting in settings for arg in ("--set", setting)]
    out = subprocess.run(
        [sys.executable, str(HERE / "read_limit.py"), spec, *sets, "--device", device],
        check=True,
        capture_output=True,
        text=True,
        cwd=HERE.parent,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure_one(key: str, rounds: int, device: str = "cpu") -> dict:
    """{"checked", "bare", "ratio", "rounds", "read", "limit", "limit_ratio", "limit_rounds"}: seconds a pass."""
    checked, bare = commands(key, device)
    wall(checked(2)), wall(bare(2), (0,))  # warm the kernel cache
    samples = []
    for round_ in range(rounds):  # which of the two goes first alternates, so a drift of the machine cancels
        if round_ % 2:
            b = per_pass(bare, (0,))
            samples.append((per_pass(checked), b))
        else:
            samples.append((per_pass(checked), per_pass(bare, (0,))))
    read = read_limit(key, device)["read_s"]
    return {
        "checked": statistics.median(c for c, _ in samples),
        "bare": statistics.median(b for _, b in samples),
        "ratio": statistics.median(c / b for c, b in samples),
        "rounds": [c / b for c, b in samples],
        "read": read,
        "limit": statistics.median(b for _, b in samples) + read,
        "limit_ratio": statistics.median(c / (b + read) for c, b in samples),
        "limit_rounds": [c / (b + read) for c, b in samples],
    }


def measure(rounds: int = 3, only=None, device: str = "cpu") -> dict:
    """row key → measure_one(key), for the keys of SCENARIOS in ``only`` (all when None)."""
    return {key: measure_one(key, rounds, device) for key in SCENARIOS if only is None or key in only}


GOALS = {"P1w": 1.05, "P6": 1.5}  # issue 42; P1w-stock has none (the correct solver is the one with a goal)


def rows(args, keys) -> list:
    """The Rows of ``keys`` (of SCENARIOS), measured over ``args.rounds`` rounds on ``args.device``."""
    from rows import Row, at_most, rounds_text

    out = []
    for key, r in measure(args.rounds, keys, args.device).items():
        goal, status = at_most(r["ratio"], GOALS[key]) if key in GOALS else ("—", "—")
        out.append(
            Row(
                key,
                "whole-process per-pass differential (70 vs 10 passes, `--format json`) vs the bare loop over the "
                f"public contract (bench/bare_loop.py, no restore), {SCENARIOS[key][3]}; the limit: the bare pass "
                "plus one read of each param's gradient",
                f"**{r['ratio']:.3f}×** ({1000 * r['checked']:.1f} ms vs {1000 * r['bare']:.1f} ms a pass; rounds "
                f"{rounds_text(r['rounds'])}); **{r['limit_ratio']:.2f}× the limit** ({1000 * r['limit']:.1f} ms: "
                f"one read {1000 * r['read']:.2f} ms)",
                goal,
                status,
                value=r["ratio"],
                rounds=tuple(r["rounds"]),
                extra={
                    "checked_ms": 1000 * r["checked"],
                    "bare_ms": 1000 * r["bare"],
                    "read_ms": 1000 * r["read"],
                    "limit_ratio": r["limit_ratio"],
                },
            )
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default=None, help=f"comma-separated rows, of {', '.join(SCENARIOS)}")
    args = parser.parse_args()
    only = [x.strip() for x in args.only.split(",")] if args.only else None
    for key, r in measure(args.rounds, only).items():
        print(
            f"{key}: gradcheck {1000 * r['checked']:.1f} ms vs bare {1000 * r['bare']:.1f} ms a pass, ratio "
            f"{r['ratio']:.3f}× (rounds {', '.join(f'{x:.3f}' for x in r['rounds'])}); limit "
            f"{1000 * r['limit']:.1f} ms (one read {1000 * r['read']:.1f} ms): {r['limit_ratio']:.3f}× the limit"
        )


if __name__ == "__main__":
    main()
