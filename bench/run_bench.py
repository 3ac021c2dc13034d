"""`make bench`: measures every row of BENCHMARKS.md, compares them with the previous run's numbers kept in
bench/baseline.json and says which rows got slower. Ratios are measured within one run.

Rows (each group's module says how it is measured):
  P3, P4       wall time of `gradcheck --help`, `gradcheck list`, `gradcheck run cartpole` (here)
  P1, P5, S1   in process (bench/inprocess.py)            P2, B1   FD and blame vs gradcheck_tape (bench/fd_blame.py)
  P1w, P1w-stock, P6   whole-process per-pass differentials and their physical limit (bench/differential.py)
  E1-E7, B2    `gradcheck exec` vs plain python (bench/exec_rows.py)
The CUDA rows are measured by bench/gpu_rows.py on a machine with a GPU.

Usage: python bench/run_bench.py [--output BENCHMARKS.md] [--rounds 5] [--device cpu] [--fail-on-regression]
       python bench/run_bench.py --only P1w,P6,E6 [--rounds 1]   (those rows alone, printed as a short table)

Every run prints a comparison with bench/baseline.json (row, previous, now, change, noise, verdict); a row is
"SLOWER" when it moved the wrong way by more than its rounds' spread (at least 3%; 10% when no spread is known).
--fail-on-regression exits 1 when any row is; a group that fails is an error row, and the run exits 2. Writing the full table (--output) also rewrites bench/baseline.json
with this run's numbers; --update-baseline does so for an --only run (its rows only).
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import baseline  # noqa: E402  (bench/ is not a package: its modules import each other by name)
import compare  # noqa: E402
import differential  # noqa: E402
import exec_rows  # noqa: E402
import fd_blame  # noqa: E402
import gpu_rows  # noqa: E402
import inprocess  # noqa: E402
from rows import Row, ok, table  # noqa: E402

# make bench rewrites what is above this line of the output file and keeps what is below it (dated sections)
KEEP_MARKER = "<!-- make bench rewrites everything above this line and keeps everything below it -->"


def wall(cmd: list[str], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(cmd, check=False, capture_output=True, cwd=ROOT)
        times.append(time.perf_counter() - started)
    return times


def p3_rows(args) -> list[Row]:
    gradcheck = [sys.executable, "-m", "gradcheck"]
    help_, list_ = wall([*gradcheck, "--help"], 5), wall([*gradcheck, "list"], 5)
    h, li = statistics.median(help_), statistics.median(list_)
    return [
        Row("P3-help", "`gradcheck --help` wall time (new process)", f"{h:.3f} s", "instant", value=h, unit="s",
            rounds=tuple(help_), label="P3"),
        Row("P3-list", "`gradcheck list` wall time (new process, no Warp import)", f"{li:.3f} s", "≤ 0.3 s",
            ok(li <= 0.3), value=li, unit="s", rounds=tuple(list_), label="P3"),
    ]  # fmt: skip


def p4_rows(args) -> list[Row]:
    times = wall([sys.executable, "-m", "gradcheck", "run", "cartpole", "--device", args.device], 3)
    seconds = statistics.median(times)
    what = "warm end-to-end `gradcheck run cartpole` (new process, warm kernel cache, 5 passes)"
    return [Row("P4", what, f"{seconds:.2f} s", value=seconds, unit="s", rounds=tuple(times))]


# --only name → the function measuring that group's rows; a full run measures them all, in this order (the table's)
GROUPS = {
    "P1": inprocess.p1_rows,
    "P5": inprocess.p5_rows,
    "P2": fd_blame.p2_rows,
    "B1": fd_blame.b1_rows,
    **{key: (lambda args, key=key: differential.rows(args, [key])) for key in differential.SCENARIOS},
    "E1": exec_rows.e1_rows,
    "E2": exec_rows.e2_rows,
    "E3": exec_rows.e3_rows,
    "E4": exec_rows.e4_rows,
    "E5": exec_rows.e5_rows,
    "E6": exec_rows.e6_rows,
    "E7": exec_rows.e7_rows,
    "B2": exec_rows.b2_rows,
    "S1": inprocess.s1_rows,
    "P3": p3_rows,
    "P4": p4_rows,
}

NOTES = """The bare loop of P1 is what a user's training loop does without gradcheck: restore the params, new tape,
forward, `tape.backward(loss)`, copy every param gradient to the host, `tape.zero()`. The diagnostics loop is
gradcheck's runner (gradient statistics against pass 1, naming, the zero audit of every gradient buffer the tape
reaches) plus all checks. Both run on a freshly set-up cartpole with the heap collected after `setup()`, which is
excluded from both. gradcheck runs the passes with the post-setup heap frozen (`gc.freeze()`); P1′ gives the bare
loop the same freeze, so it isolates gradcheck's own per-pass work.

P1w, P1w-stock and P6 are measured from outside, as a user sees them: `gradcheck run SPEC --passes N --format json`
and the bare loop (bench/bare_loop.py, the same `--set` options) as fresh processes at N = 10 and 70,
(t70 - t10) / 60 per pass, so setup, compilation and the one-off probes cancel (P6 with `--fd off --no-replay`: 124
finite-difference rollouts of a 16M-float forward would drown the differential). gradcheck restores the params
before every pass; the bare loop does not. The limit is the bare pass plus one read of each param's gradient, timed
as half a `wp.copy` of the gradient buffers (bench/read_limit.py): whatever gradcheck learns about a gradient, it
reads it at least once, so "× the limit" is how far a row is from the cheapest bookkeeping possible.

P5 on CPU: Warp runs CPU kernels on one thread without vectorising the loop; a bare float32 sum over 16M floats
measured 42 ms here against ~10 ms for the `memcpy` behind `wp.copy`, so no Warp CPU kernel that reads every value
can meet 2× on this machine. `warp.autograd.gradcheck_tape` (B1) checks each launch in isolation with the values left
after the forward pass, so it cannot see the inter-step rewrites that bias the stock solver, and it fails on the
correct (per-step) solver too (kernels that accumulate into their outputs, the Cholesky adjoint, a deliberate no-op).

`make bench` keeps each row's number, unit, goal, rounds, date, commit and machine in bench/baseline.json and
compares the next run with it: a row is slower when it moved the wrong way by more than the larger relative spread
((max − min) / median) of the two runs' rounds, at least 3%, or by 10% when neither kept rounds
(`python bench/run_bench.py --fail-on-regression` exits 1 then).
"""


def render(rows: list[Row], args, full: bool) -> str:
    """The full BENCHMARKS.md (header, table, notes, the CUDA section), or for --only the short table alone."""
    stamp = f"{datetime.date.today().isoformat()} (commit {baseline.commit()}) on {baseline.machine(args.device)}"
    if not full:
        return (
            f"Measured {stamp} with `python bench/run_bench.py --only {args.only}`; rounds {args.rounds}, long rows "
            f"{args.long_rounds}.\n\n{table(rows)}\n"
        )
    return (
        f"# Benchmarks\n\nMeasured {stamp} with `make bench` (`python bench/run_bench.py`). Medians over "
        f"{args.rounds} rounds ({args.long_rounds} for E3 and E5); every ratio compares two timings taken in the same "
        f"run.\n\n{table(rows)}\n\n{NOTES}\n{gpu_rows.section(HERE / 'gpu_rows.md')}\n"
    )


def write_output(path: Path, text: str, full: bool) -> None:
    """Write ``text``; a full table keeps the file's dated sections below KEEP_MARKER."""
    if full:
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        text += "\n" + (old[old.index(KEEP_MARKER) :] if KEEP_MARKER in old else KEEP_MARKER + "\n")
    path.write_text(text, encoding="utf-8")


def report_changes(rows: list[Row], args) -> list[compare.Change]:
    """Print the comparison with the baseline and return it."""
    previous = baseline.load(args.baseline)
    now = {row.key: row.record() for row in rows}
    changes = compare.compare(previous, now)
    print(f"Compared with the numbers kept in {args.baseline}:")
    for other in sorted(baseline.other_machines(previous, now, args.device)):
        print(f"  note: some previous numbers come from another machine ({other}); compare ratios, not seconds")
    print(compare.table(changes))
    print(compare.summary(changes))
    return changes


def parse(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", default=None, type=Path, help="write the results as Markdown to this file")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--only", default=None, metavar="IDS", help=f"comma-separated groups, of {', '.join(GROUPS)}")
    parser.add_argument("--long-rounds", type=int, default=1, help="rounds of the long rows (E3, E5)")
    sizes = lambda text: [int(x) for x in text.split(",")]  # noqa: E731
    parser.add_argument("--fit-sizes", type=sizes, default=list(exec_rows.FIT_SIZES), help="E3's sizes")
    parser.add_argument("--long-sizes", type=sizes, default=[1000, 10000, 100000], help="E2's sizes")
    parser.add_argument("--baseline", type=Path, default=baseline.PATH, help="the previous numbers (JSON)")
    parser.add_argument("--update-baseline", action="store_true", help="write this run's rows to --baseline")
    parser.add_argument("--fail-on-regression", action="store_true", help="exit 1 when a row got slower")
    args = parser.parse_args(argv)
    args.groups = list(GROUPS)
    if args.only:
        names = {name.lower(): name for name in GROUPS}
        wanted = [x.strip() for x in args.only.split(",") if x.strip()]
        unknown = [x for x in wanted if x.lower() not in names]
        if unknown:
            parser.error(f"--only: unknown rows {unknown}; choose from {', '.join(GROUPS)}")
        args.groups = [names[x.lower()] for x in wanted]
    return args


def main(argv=None) -> int:
    args = parse(argv)
    rows: list[Row] = []
    failed = []
    for name in args.groups:
        print(f"measuring {name} ...", file=sys.stderr, flush=True)
        try:
            rows += GROUPS[name](args)
        except Exception as exc:  # one broken group is an error row, not 30 minutes of other rows lost
            traceback.print_exc()
            failed.append(name)
            rows.append(Row(name, f"group {name}", f"**error**: {type(exc).__name__}: {exc}"[:300], status="**error**"))
    full = not args.only
    text = render(rows, args, full)
    print(text)
    changes = report_changes(rows, args)
    if args.output:
        write_output(args.output, text, full)
    if (args.output and full) or args.update_baseline:
        baseline.save(baseline.stamped({row.key: row.record() for row in rows}, args.device), args.baseline)
        print(f"wrote {args.baseline}")
    if failed:
        print(f"these groups failed (their rows say error): {', '.join(failed)}", file=sys.stderr)
        return 2
    return 1 if args.fail_on_regression and compare.regressions(changes) else 0


if __name__ == "__main__":
    sys.exit(main())
