"""The CUDA rows of BENCHMARKS.md, measured on a machine with a CUDA GPU in under 5 minutes (issue 42, item 4).

    python bench/gpu_rows.py --output bench/gpu_rows.md [--device cuda:0] [--rounds 3] [--only P1,P6,E5,B1]

P1  cartpole T=100: gradcheck's diagnostics loop vs the bare loop, in process, per pass (bench/inprocess.py).
P6  the 16M-float param, the same way, and its limit: the bare pass plus one read of the 64 MiB gradient at the
    device's memory bandwidth, measured there (a timed `wp.copy` of the buffer: bench/read_limit.py).
E5  `gradcheck exec` vs python on Newton's diffsim examples on the GPU, where they capture CUDA graphs (wall time).
B1  `gradcheck blame cartpole --device cuda:0` (every launch's adjoint tested), whole process, wall time, beside
    `gradcheck run cartpole` on the same device.
Writes a Markdown fragment naming the device and driver to --output and the same numbers as JSON beside it
(--output with .json); `make bench` puts bench/gpu_rows.md into BENCHMARKS.md. Without a CUDA device it says so in
one line and exits 2.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from rows import Row, at_most, rounds_text, table  # noqa: E402

EXAMPLES = {"diffsim_ball": ("38", 1.1), "diffsim_cloth": ("122", 1.15)}  # --num-frames (as on CPU), goal
# group → (label, what, goal): the rows this script measures, and what BENCHMARKS.md lists until it has run
PLAN = {
    "P1": ("P1 (CUDA)", "full diagnostics vs the bare loop, cartpole T=100, 20 passes, in process", "≤ 1.1×"),
    "P6": (
        "P6 (CUDA)",
        "the 16,777,216-float param, diagnostics vs the bare loop per pass, and × the limit (bare pass + one read of "
        "the 64 MiB gradient at the device's bandwidth, from a timed `wp.copy`)",
        "≤ 1.5×",
    ),
    "E5": ("E5 (CUDA)", "`gradcheck exec` vs python on `diffsim_ball` and `diffsim_cloth` (CUDA graphs)", "≤ 1.1×"),
    "B1": ("B1 (CUDA)", "`gradcheck blame cartpole --device cuda:0`, whole process, vs `gradcheck run`", "—"),
}
COMMAND = "python bench/gpu_rows.py --output bench/gpu_rows.md"


def section(path: Path) -> str:
    """BENCHMARKS.md's "GPU (CUDA)" section: the measured fragment at ``path`` if there is one, else PLAN's rows
    marked "not measured" with the command that measures them."""
    if path.exists():
        return path.read_text(encoding="utf-8").rstrip() + "\n"
    rows = [Row(key, what, "not measured", goal, label=label) for key, (label, what, goal) in PLAN.items()]
    return (
        "## GPU (CUDA)\n\nNot measured: no CUDA GPU on the machines these numbers came from. On a machine with one,\n"
        f"`{COMMAND}` measures these rows in under 5 minutes, naming the device\n"
        f"and driver; `make bench` then puts that file here.\n\n{table(rows)}\n"
    )


def parse(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", required=True, type=Path, help="the Markdown fragment (JSON beside it)")
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--passes", type=int, default=20, help="passes of P1 and P6's loops")
    parser.add_argument("--only", default=",".join(PLAN), help=f"comma-separated groups, of {', '.join(PLAN)}")
    args = parser.parse_args(argv)
    args.groups = [x.strip().upper() for x in args.only.split(",") if x.strip()]
    unknown = [x for x in args.groups if x not in PLAN]
    if unknown:
        parser.error(f"--only: unknown groups {unknown}; choose from {', '.join(PLAN)}")
    if not args.device.startswith("cuda"):
        parser.error(f"--device {args.device}: this script measures CUDA devices (cuda:N); CPU rows: make bench")
    return args


def _quiet_init(wp) -> None:
    """wp.init() with its banner and the native "could not load the CUDA driver" warning silenced (file descriptors
    1 and 2 pointed at /dev/null meanwhile), so a machine without a GPU gets this script's one line only."""
    saved = [os.dup(1), os.dup(2)]
    sys.stdout.flush(), sys.stderr.flush()
    with open(os.devnull, "wb") as null:
        os.dup2(null.fileno(), 1), os.dup2(null.fileno(), 2)
        try:
            wp.init()
        finally:
            sys.stdout.flush(), sys.stderr.flush()
            os.dup2(saved[0], 1), os.dup2(saved[1], 2)
            os.close(saved[0]), os.close(saved[1])


def cuda_device(name: str):
    """The Warp device ``name``, or None when Warp sees no CUDA device of that name."""
    import warp as wp

    wp.config.quiet = True  # no "Module ... loaded" lines between the rows
    _quiet_init(wp)
    if not wp.is_cuda_available():
        return None
    try:
        return wp.get_device(name)
    except (ValueError, RuntimeError):
        return None


def p1_rows(args) -> list[Row]:
    import inprocess

    r = inprocess.p1(args.device, args.rounds, passes=args.passes)
    goal, status = at_most(r["ratio"], 1.1)
    measured = (
        f"**{r['ratio']:.3f}×** ({1000 * r['diag']:.1f} ms vs {1000 * r['bare']:.1f} ms per pass; rounds "
        f"{rounds_text(r['ratios'])})"
    )
    label, what, _ = PLAN["P1"]
    return [Row("P1-cuda", what, measured, goal, status, value=r["ratio"], rounds=tuple(r["ratios"]), label=label)]


def p6_rows(args) -> list[Row]:
    import inprocess
    import read_limit

    from gradcheck.scenario import loader
    from gradcheck.scenario.resolve import resolve

    spec = str(HERE / "large_param.py")
    r = inprocess.p1(
        args.device, args.rounds, passes=args.passes, make=lambda: loader.load(resolve(spec)), options={}, expected=None
    )
    read = read_limit.measure(spec, {}, args.device)
    limit = r["bare"] + read["read_s"]
    goal, status = at_most(r["ratio"], 1.5)
    measured = (
        f"**{r['ratio']:.3f}×** ({1000 * r['diag']:.2f} ms vs {1000 * r['bare']:.2f} ms per pass; rounds "
        f"{rounds_text(r['ratios'])}); **{r['diag'] / limit:.2f}× the limit** ({1000 * limit:.2f} ms: one read "
        f"{1000 * read['read_s']:.3f} ms at {read['bandwidth_gbs']:.0f} GB/s)"
    )
    label, what, _ = PLAN["P6"]
    extra = {"limit_ratio": r["diag"] / limit, "bandwidth_gbs": read["bandwidth_gbs"], "read_ms": 1000 * read["read_s"]}
    return [
        Row("P6-cuda", what, measured, goal, status, r["ratio"], rounds=tuple(r["ratios"]), extra=extra, label=label)
    ]


def e5_rows(args) -> list[Row]:
    """Each diffsim example under python and under `gradcheck exec`, alternating, wall time (GPU work is not the
    process's CPU time): one warm-up pair, then ``args.rounds`` pairs."""
    import exec_rows

    rows = []
    for example, (frames, goal) in EXAMPLES.items():
        program = ["-m", "newton.examples", example, "--viewer", "null", "--device", args.device]
        program += ["--num-frames", frames]
        report = Path(tempfile.gettempdir()) / f"gradcheck-gpu-{example}.json"
        exec_rows.exec_pair(program, report)  # compiles the CUDA kernels on a fresh machine
        pairs = [exec_rows.exec_pair(program, report) for _ in range(args.rounds)]
        ratios = [p["wall_ratio"] for p in pairs]
        ratio = statistics.median(ratios)
        failed = next((p["exec"]["failed"] for p in pairs if p["exec"]["failed"]), None)
        text = f"**{failed}**" if failed else (
            f"**{ratio:.3f}×** wall ({statistics.median(p['exec']['s'] for p in pairs):.2f} s vs "
            f"{statistics.median(p['python']['s'] for p in pairs):.2f} s; rounds {rounds_text(ratios)}); findings: "
            f"{', '.join(pairs[-1]['exec']['findings']) or 'none'}"
        )  # fmt: skip
        what = f"`gradcheck exec` vs `python {' '.join(program)}` (CUDA graphs), whole process"
        goal_text, status = at_most(ratio, goal)
        rows.append(Row(f"E5-cuda-{example}", what, text, goal_text, "**error**" if failed else status,
                        None if failed else ratio, rounds=tuple(ratios), label="E5 (CUDA)"))  # fmt: skip
    return rows


def b1_rows(args) -> list[Row]:
    """`gradcheck blame cartpole` and `gradcheck run cartpole` on the device, whole processes, wall."""
    import exec_rows

    report = Path(tempfile.gettempdir()) / "gradcheck-gpu-blame.json"
    gradcheck = [sys.executable, "-m", "gradcheck"]
    blame = exec_rows.child([*gradcheck, "blame", "cartpole", "--device", args.device, "--format", "json",
                             "--output", str(report)])  # fmt: skip
    run = exec_rows.child([*gradcheck, "run", "cartpole", "--device", args.device, "--format", "json"])
    try:
        kernels = json.loads(report.read_text(encoding="utf-8"))["scenarios"][0]["blame"]["kernels"]
        launches = f"{sum(k['launches'] for k in kernels)} launches tested"
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        launches = f"no blame report (exit status {blame['status']})"
    label, what, goal = PLAN["B1"]
    measured = f"**{blame['s']:.1f} s** ({launches}; `gradcheck run cartpole`: {run['s']:.1f} s)"
    return [Row("B1-cuda", what, measured, goal, value=blame["s"], unit="s", label=label)]


GROUPS = {"P1": p1_rows, "P6": p6_rows, "E5": e5_rows, "B1": b1_rows}


def main(argv=None) -> int:
    args = parse(argv)
    device = cuda_device(args.device)
    if device is None:
        print(
            f"gpu_rows: no CUDA device {args.device} here (Warp sees none); run it on a machine with a CUDA GPU",
            file=sys.stderr,
        )
        return 2
    import warp as wp

    driver = ".".join(map(str, wp.get_cuda_driver_version() or ())) or "unknown"
    started, rows = time.perf_counter(), []
    for name in args.groups:
        print(f"measuring {name} on {device.name} ...", file=sys.stderr, flush=True)
        try:
            rows += GROUPS[name](args)
        except Exception as exc:  # a GPU session is short: one broken group must not lose the others
            traceback.print_exc()
            label, what, goal = PLAN[name]
            error = f"**error**: {type(exc).__name__}: {exc}"[:300]
            rows.append(Row(f"{name}-cuda", what, error, goal, "**error**", label=label))
    seconds = time.perf_counter() - started
    stamp = f"{datetime.date.today().isoformat()} on {device.name} ({args.device}, CUDA driver {driver}), warp-lang"
    text = (
        f"## GPU (CUDA)\n\nMeasured {stamp} {wp.__version__}, with `python bench/gpu_rows.py --rounds {args.rounds}` "
        f"in {seconds:.0f} s (kernel compiles of a fresh machine included).\n\n{table(rows)}\n"
    )
    args.output.write_text(text, encoding="utf-8")
    record = {"device": device.name, "driver": driver, "warp": wp.__version__, "seconds": seconds}
    record["rows"] = {row.key: row.record() for row in rows}
    args.output.with_suffix(".json").write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", "utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
