"""Benchmarks P1, P3, P4; writes BENCHMARKS.md. Ratios are measured within one run.

P1  full diagnostics (runner + checks) vs a bare forward+backward loop, cartpole T=100,
    20 passes, same process, same scenario object; goal <= 1.10x.
P3  wall time of `gradcheck --help` and `gradcheck list` (fresh processes); goal <= 0.3 s for list.
P4  warm end-to-end `gradcheck run cartpole` (fresh process, warm kernel cache).
E3  `gradcheck exec` on a 1,024-element fit loop (bench/programs/fit_loop.py) at 10^3 and 10^4 backwards vs plain
    python: time ratio, extra peak RSS, report bytes, and their growth from 10^3 to 10^4; goal <= 1.3x, flat.
E4  `gradcheck exec` on 300 backwards of a tiny kernel (bench/programs/small_kernel_300.py); goal <= 1.3x.
E5  `gradcheck exec` on Newton's diffsim examples long enough to run >= 5 s; goal <= 1.15x.

Usage: python bench/run_bench.py [--output BENCHMARKS.md] [--rounds 3] [--device cpu]
       python bench/run_bench.py --only E3,E4,E5   (those rows alone, printed as a short table)
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PASSES = 20
STEPS = "100"


def bare_loop(device: str, passes: int, freeze: bool = False) -> float:
    """What a user's loop does without gradcheck: restore, tape, forward, backward, read grads, zero.

    Runs on a freshly set-up scenario, like the diagnostics loop (first passes over new arrays are slower).
    """
    from gradcheck.scenarios.cartpole import CartPole
    from gradcheck.warp_compat import load_warp

    wp = load_warp()
    scenario = CartPole()
    with wp.ScopedDevice(device):
        scenario.setup(device, steps=STEPS)
        params = scenario.params()
        snapshots = {k: wp.clone(v, requires_grad=False) for k, v in params.items()}
        wp.synchronize_device(device)
        gc.collect()  # both loops start from a collected heap
        if freeze:  # what gradcheck's runner does around its passes
            gc.freeze()
        started = time.perf_counter()
        for _ in range(passes):
            for key, arr in params.items():
                wp.copy(arr, snapshots[key])
            tape = wp.Tape()
            with tape:
                loss = scenario.forward()
            tape.backward(loss)
            grads = [arr.grad.numpy().copy() for arr in params.values()]
            tape.zero()
            wp.synchronize_device(device)
        elapsed = time.perf_counter() - started
    if freeze:
        gc.unfreeze()
    del grads
    return elapsed


class _CollectAfterSetup:
    """Wraps a scenario so the heap is collected between setup() and the first pass, as in bare_loop."""

    def __init__(self, scenario):
        self._scenario = scenario

    def setup(self, *args, **kwargs):
        self._scenario.setup(*args, **kwargs)
        gc.collect()

    def __getattr__(self, name):
        return getattr(self._scenario, name)


def diagnostics_loop(device: str, passes: int) -> float:
    """gradcheck's runner and checks over the same passes; setup() excluded (timed per pass)."""
    from gradcheck.checks import run_checks
    from gradcheck.engine.runner import run_passes
    from gradcheck.scenarios.cartpole import CartPole

    scenario = _CollectAfterSetup(CartPole())
    trace = run_passes(scenario, name="cartpole", device=device, passes=passes, options={"steps": STEPS})
    started = time.perf_counter()
    findings = run_checks(trace)
    checks = time.perf_counter() - started
    # the stock cartpole shares its solver scratch across steps: write-after-read warnings, and nothing else
    assert all(f.check == "write-after-read" for f in findings), findings
    return sum(p.seconds for p in trace.passes) + checks


def p1(device: str, rounds: int, freeze: bool = False) -> dict:
    bare_loop(device, 2)  # warm-up: kernels loaded from the cache, caches hot
    diagnostics_loop(device, 2)
    ratios, bares, diags = [], [], []
    for _ in range(rounds):
        # bare, diagnostics, bare: the ratio uses the mean of the two bare runs around it, so slow
        # drifts of the machine (frequency, the other core) cancel
        before = bare_loop(device, PASSES, freeze)
        diag = diagnostics_loop(device, PASSES)
        after = bare_loop(device, PASSES, freeze)
        bare = (before + after) / 2
        bares.append(bare)
        diags.append(diag)
        ratios.append(diag / bare)
    return {
        "bare": statistics.median(bares),
        "diag": statistics.median(diags),
        "ratio": statistics.median(ratios),
        "ratios": ratios,
    }


def struct_audit_cost(device: str, repeat: int = 3) -> dict:
    """S1: walk + tape scan + struct audit over 10,000 array fields and 10,000 launches."""
    sys.path.insert(0, str(Path(__file__).parent))
    from struct_tree import FIELDS, StructTree

    from gradcheck.measure.allocations import AllocationLedger
    from gradcheck.measure.struct_audit import StructAuditor
    from gradcheck.tape.naming import walk
    from gradcheck.tape.tape_arguments import TapeArguments

    with AllocationLedger() as ledger:
        tree = StructTree(cells=10_000 // FIELDS, launches=10_000, device=device)
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            arguments = TapeArguments.of(tree.tape)
            names = walk(tree)
            roots = [(names.structs.get(id(v), ("?", v))[0], v, True) for v in arguments.struct_roots]
            roots += [(path, obj, False) for path, obj in names.structs.values()]
            issues = StructAuditor(names, ledger).audit(roots)
            times.append(time.perf_counter() - started)
    assert not issues, issues[:3]
    return {"seconds": statistics.median(times), "fields": 10_000, "launches": len(tree.tape.launches)}


def stats_vs_copy(device: str, repeat: int = 7) -> dict:
    """P5: on-device stats of a 16M-float gradient buffer vs a wp.copy of the same buffer."""
    import numpy as np

    from gradcheck.measure.stats import StatsPlan
    from gradcheck.warp_compat import load_warp

    wp = load_warp()
    n = 16 * 1024 * 1024
    values = wp.array(np.random.default_rng(0).normal(size=n).astype(np.float32), device=device)
    target = wp.empty_like(values)
    plan = StatsPlan()
    plan.table([values])  # warm: kernel loaded, tables built
    wp.copy(target, values)

    def timed(fn) -> float:
        times = []
        for _ in range(repeat):
            wp.synchronize_device(device)
            started = time.perf_counter()
            fn()
            wp.synchronize_device(device)
            times.append(time.perf_counter() - started)
        return statistics.median(times)

    copy = timed(lambda: wp.copy(target, values))
    stats = timed(lambda: plan.table([values]))
    return {"copy": copy, "stats": stats, "ratio": stats / copy, "floats": n}


def fd_cost(device: str, steps: str = STEPS, gradcheck_tape: bool = True) -> dict:
    """P2: fast directional FD vs element-wise FD over every scalar param, same scenario, same run;
    plus warp.autograd.gradcheck_tape on the same tape (time and verdict)."""
    import contextlib
    import io

    import numpy as np

    from gradcheck.model.options import FDOptions
    from gradcheck.rerun.finite_diff import Judge, Rollouts, param_scale, run_fd
    from gradcheck.scenarios.cartpole import CartPole
    from gradcheck.warp_compat import load_warp

    wp = load_warp()
    out = {}
    for scratch in ("shared", "per-step"):
        scenario = CartPole()
        with wp.ScopedDevice(device):
            scenario.setup(device, steps=steps, scratch=scratch)
            params = scenario.params()
            snapshots = {k: wp.clone(a, requires_grad=False) for k, a in params.items()}
            tape = wp.Tape()
            with tape:
                loss = scenario.forward()
            tape.backward(loss)
            grads = {k: a.grad.numpy().astype(np.float64) for k, a in params.items()}
            scalars = sum(g.size for g in grads.values())

            started = time.perf_counter()
            fast = run_fd(scenario, params, snapshots, grads, FDOptions(auto_elements=False))
            fast_s = time.perf_counter() - started

            started = time.perf_counter()
            rollouts = Rollouts(scenario, params, snapshots)
            judge = Judge(rollouts, rollouts.loss({}), FDOptions())
            worst = 0.0
            for key, g in grads.items():
                scale = param_scale(rollouts.x0[key])
                floor = 1e-2 * float(np.max(np.abs(g))) * scale
                for index in np.ndindex(g.shape):
                    delta = {key: np.zeros_like(rollouts.x0[key])}
                    delta[key][index] = scale
                    probe = judge.probe("e", float(g[index]) * scale, delta, floor)
                    worst = max(worst, probe.rel_error)
            elements_s = time.perf_counter() - started
            row = {
                "scalars": scalars,
                "fast_s": fast_s,
                "fast_rollouts": fast.rollouts,
                "fast_error": fast.max_direction_error,
                "elements_s": elements_s,
                "elements_rollouts": rollouts.count,
                "elements_worst": worst,
            }
            if gradcheck_tape:
                from warp.autograd import gradcheck_tape as warp_gradcheck_tape

                tape.zero()
                started = time.perf_counter()
                sink = io.StringIO()
                with contextlib.redirect_stdout(sink):
                    passed = warp_gradcheck_tape(tape, raise_exception=False, show_summary=False)
                row["gradcheck_tape_s"] = time.perf_counter() - started
                row["gradcheck_tape_passed"] = bool(passed)
                row["gradcheck_tape_launches"] = len(tape.launches)
            row.update(blame_cost(scenario, params, snapshots))
            out[scratch] = row
    return out


def blame_cost(scenario, params: dict, snapshots: dict) -> dict:
    """B1: gradcheck's per-launch adjoint test over every launch (recording forward, two tangent forwards, the
    tests), as `gradcheck blame` runs it, on the same scenario as gradcheck_tape."""
    from gradcheck.model.options import FDOptions
    from gradcheck.rerun import launch_check
    from gradcheck.warp_compat import load_warp

    wp = load_warp()

    def restore():
        for key, arr in params.items():
            wp.copy(arr, snapshots[key])

    restore()
    started = time.perf_counter()
    recorder, _tape, _loss = launch_check.record_forward(scenario)
    tangents = launch_check.record_tangents(scenario, params, restore, recorder)
    verdicts = launch_check.check_launches(recorder, list(params.values()), FDOptions(), tangents=tangents)
    seconds = time.perf_counter() - started
    restore()
    statuses: dict[str, int] = {}
    for v in verdicts:
        statuses[v.status] = statuses.get(v.status, 0) + 1
    return {"blame_s": seconds, "blame_launches": len(verdicts), "blame_statuses": statuses}


def wall(cmd: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(cmd, check=False, capture_output=True, cwd=ROOT)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


PROGRAMS = Path(__file__).resolve().parent / "programs"
FIT_SIZES = (1000, 10000)
# example → its arguments. A training iteration is a step; the null viewer counts frames, and these examples render
# (sim_steps + 1 frames) only every 16th (ball: 37 frames) or 4th (cloth: 121 frames) iteration, so --num-frames up to
# 37 (121) is one training iteration and 38 (122) is 16 (4): on CPU ~19 s and ~57 s of plain python.
DIFFSIM = {
    "diffsim_ball": ["--num-frames", "38"],
    "diffsim_cloth": ["--num-frames", "122"],
}


def child(command: list[str]) -> dict:
    """One fresh process: wall seconds, CPU seconds (user + system), peak RSS (MiB) and exit status, from getrusage
    of the children of a probe process (so the probe's own time and memory are not counted). CPU time is what the
    ratios use: on a shared 2-core machine another process's load stretches wall time, not CPU time."""
    probe = (
        "import resource, subprocess, sys, time; t = time.perf_counter(); "
        "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
        "u = resource.getrusage(resource.RUSAGE_CHILDREN); "
        "print(time.perf_counter() - t, u.ru_utime + u.ru_stime, u.ru_maxrss, r.returncode)"
    )
    out = subprocess.run([sys.executable, "-c", probe, *command], check=True, capture_output=True, text=True, cwd=ROOT)
    seconds, cpu, rss, status = out.stdout.split()
    return {"s": float(seconds), "cpu": float(cpu), "mib": int(rss) / 1024, "status": int(status)}


def exec_pair(program: list[str], report: Path) -> dict:
    """The program under plain python and under `gradcheck exec --format json --output REPORT`, back to back:
    {"python": child, "exec": child + report bytes and findings, "ratio", "extra_mib"}."""
    import json

    plain = child([sys.executable, *program])
    report.unlink(missing_ok=True)
    audited = child([sys.executable, "-m", "gradcheck", "exec", "--format", "json", "--output", str(report), *program])
    audited["bytes"] = report.stat().st_size if report.exists() else 0
    try:
        found = json.loads(report.read_text(encoding="utf-8"))["scenarios"][0]["findings"]
        audited["findings"] = sorted({f.get("check", "?") for f in found}) if found else []
        audited["failed"] = None
    except (OSError, ValueError, KeyError, IndexError):
        audited["findings"] = []
        audited["failed"] = f"exec failed: exit status {audited['status']}, no report"
    if plain["status"] != 0:
        audited["failed"] = f"the program failed under python: exit status {plain['status']}"
    return {
        "python": plain,
        "exec": audited,
        "ratio": audited["cpu"] / plain["cpu"],
        "wall_ratio": audited["s"] / plain["s"],
        "extra_mib": audited["mib"] - plain["mib"],
    }


def median_pair(program: list[str], report: Path, rounds: int) -> dict:
    """``rounds`` pairs (python, exec alternating, so drifts of the machine cancel in the ratio); the median pair by
    ratio, with every ratio."""
    pairs = sorted((exec_pair(program, report) for _ in range(max(rounds, 1))), key=lambda p: p["ratio"])
    chosen = dict(pairs[len(pairs) // 2])
    chosen["rounds"] = [p["ratio"] for p in pairs]
    return chosen


def warm(program: list[str], report: Path) -> None:
    """One unmeasured run of each (the kernel cache is loaded; first-run compiles are not timed)."""
    exec_pair(program, report)


def fit_loop(rounds: int, sizes=FIT_SIZES) -> dict:
    """E3: the fit loop at each size; growth of exec's extra memory and report bytes from the first to the last."""
    import tempfile

    report = Path(tempfile.gettempdir()) / "gradcheck-bench-e3.json"
    program = [str(PROGRAMS / "fit_loop.py"), "--iters"]
    warm([*program, "10"], report)
    rows = {n: median_pair([*program, str(n)], report, rounds) for n in sizes}
    first, last = rows[sizes[0]], rows[sizes[-1]]
    span = sizes[-1] - sizes[0]
    per = {k: 1000 * (last[k]["cpu"] - first[k]["cpu"]) / span for k in ("python", "exec")}
    return {
        "rows": rows,
        "memory_growth": max(last["extra_mib"], 1.0) / max(first["extra_mib"], 1.0),  # 1 MiB floor: RSS noise
        "report_growth": last["exec"]["bytes"] / max(first["exec"]["bytes"], 1),
        "per_backward_ms": per,
    }


def small_kernel(rounds: int) -> dict:
    """E4: 300 backwards of a tiny kernel, whole process."""
    import tempfile

    report = Path(tempfile.gettempdir()) / "gradcheck-bench-e4.json"
    program = [str(PROGRAMS / "small_kernel_300.py")]
    warm(program, report)
    return median_pair(program, report, rounds)


def diffsim(rounds: int) -> dict:
    """E5: each of DIFFSIM's examples, whole process, warm cache."""
    import tempfile

    out = {}
    for example, extra in DIFFSIM.items():
        report = Path(tempfile.gettempdir()) / f"gradcheck-bench-e5-{example}.json"
        program = ["-m", "newton.examples", example, "--viewer", "null", "--device", "cpu", *extra]
        warm([*program[:-2], "--num-frames", "1"] if extra[:1] == ["--num-frames"] else program, report)
        out[example] = median_pair(program, report, rounds)
    return out


def _pair_text(r: dict) -> str:
    e, p = r["exec"], r["python"]
    if e["failed"]:
        return f"**{e['failed']}** (ran {e['s']:.2f} s vs python {p['s']:.2f} s)"
    findings = ", ".join(e["findings"]) if e["findings"] else "none"
    return (
        f"**{r['ratio']:.2f}×** CPU time ({e['cpu']:.2f} s vs {p['cpu']:.2f} s; rounds "
        f"{', '.join(f'{x:.2f}' for x in r['rounds'])}; wall {r['wall_ratio']:.2f}×, {e['s']:.2f} s vs {p['s']:.2f} s); "
        f"extra peak RSS {r['extra_mib']:.0f} MiB ({e['mib']:.0f} vs {p['mib']:.0f} MiB); report {e['bytes'] / 1024:.1f} KiB; "
        f"findings: {findings}"
    )


def _status(r: dict, goal: float) -> str:
    return "**error**" if r["exec"]["failed"] else ok(r["ratio"] <= goal)


def flat_rows(r: dict) -> str:
    """E3, E4, E5 (whichever were measured)."""
    rows = []
    if "e3" in r:
        e3 = r["e3"]
        for n, row in e3["rows"].items():
            rows.append(
                f"| E3 | `gradcheck exec` vs python on a 1,024-element fit loop (`bench/programs/fit_loop.py`: fresh "
                f"loss array and tape an iteration, SGD outside the tape, `tape.zero()`), {n:,} backwards | "
                f"{_pair_text(row)} | ≤ 1.3× | {_status(row, 1.3)} |"
            )
        first, last = list(e3["rows"])[0], list(e3["rows"])[-1]
        p = e3["per_backward_ms"]
        rows.append(
            f"| E3 | the same, growth from {first:,} to {last:,} backwards: exec's extra peak RSS and report bytes | "
            f"**{e3['memory_growth']:.2f}× memory, {e3['report_growth']:.2f}× report** (per backward after the first "
            f"{first:,}: exec {p['exec']:.3f} ms vs python {p['python']:.3f} ms of CPU) | ≤ 1.5× each | "
            f"{'**error**' if any(row['exec']['failed'] for row in e3['rows'].values()) else ok(e3['memory_growth'] <= 1.5 and e3['report_growth'] <= 1.5)} |"
        )
    if "e4" in r:
        rows.append(
            f"| E4 | `gradcheck exec` vs python on 300 backwards of a tiny kernel (`bench/programs/small_kernel_300.py`"
            f", whole process) | {_pair_text(r['e4'])} | ≤ 1.3× | {_status(r['e4'], 1.3)} |"
        )
    for example, row in r.get("e5", {}).items():
        rows.append(
            f"| E5 | `gradcheck exec` vs `python -m newton.examples {example} --viewer null --device cpu "
            f"{' '.join(DIFFSIM[example])}` (whole process, warm cache) | {_pair_text(row)} | ≤ 1.15× | "
            f"{_status(row, 1.15)} |"
        )
    return "\n".join(rows)


ONLY = ("E1", "E2", "E3", "E4", "E5", "B1", "B2")


def blame_vs_gradcheck_tape(device: str, steps: str = STEPS) -> dict:
    """B1 alone: the per-launch adjoint test over every launch of cartpole (stock, shared scratch) and
    warp.autograd.gradcheck_tape on the same tape, measured in one run."""
    import contextlib
    import io

    from warp.autograd import gradcheck_tape as warp_gradcheck_tape

    from gradcheck.scenarios.cartpole import CartPole
    from gradcheck.warp_compat import load_warp

    wp = load_warp()
    scenario = CartPole()
    with wp.ScopedDevice(device):
        scenario.setup(device, steps=steps, scratch="shared")
        params = scenario.params()
        snapshots = {k: wp.clone(a, requires_grad=False) for k, a in params.items()}
        row = blame_cost(scenario, params, snapshots)
        tape = wp.Tape()
        with tape:
            scenario.forward()
        started = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            passed = warp_gradcheck_tape(tape, raise_exception=False, show_summary=False)
        row.update(gradcheck_tape_s=time.perf_counter() - started, gradcheck_tape_passed=bool(passed))
        row["gradcheck_tape_launches"] = len(tape.launches)
    return row


def exec_blame(rounds: int) -> dict:
    """B2: `gradcheck exec --blame` (every launch of the first backward tested) on diffsim_ball vs plain python."""
    import tempfile

    report = Path(tempfile.gettempdir()) / "gradcheck-bench-b2.json"
    program = ["-m", "newton.examples", "diffsim_ball", "--viewer", "null", "--num-frames", "3", "--device", "cpu"]
    plain = [sys.executable, *program]
    audited = [sys.executable, "-m", "gradcheck", "exec", "--blame", "--format", "json", "--output", str(report)]
    audited += program
    wall(plain, 1), wall(audited, 1)  # warm the kernel cache
    times = [(wall(plain, 1), wall(audited, 1)) for _ in range(rounds)]
    blame = json.loads(report.read_text())["scenarios"][0]["blame"]
    ratios = sorted(a / p for p, a in times)
    return {
        "python": sorted(p for p, _ in times)[len(times) // 2],
        "exec": sorted(a for _, a in times)[len(times) // 2],
        "ratio": ratios[len(ratios) // 2],
        "launches": sum(k["launches"] for k in blame["kernels"]),
        "statuses": {k["kernel"]: k["statuses"] for k in blame["kernels"]},
    }


def blame_rows(results: dict) -> list[str]:
    rows = []
    if "b1" in results:
        b = results["b1"]
        ratio = b["gradcheck_tape_s"] / b["blame_s"]
        rows.append(
            f"| B1 | per-launch adjoint test over every launch (`gradcheck blame`, struct arguments and in-place "
            f"launches included) vs `warp.autograd.gradcheck_tape`, cartpole T={STEPS}, stock | **{ratio:.1f}× "
            f"faster** ({b['blame_s']:.1f} s vs {b['gradcheck_tape_s']:.1f} s, {b['blame_launches']} launches: "
            f"{_statuses(b['blame_statuses'])}) | ≥ 30× | {ok(ratio >= 30)} |"
        )
    if "b2" in results:
        b = results["b2"]
        rows.append(
            f"| B2 | `gradcheck exec --blame` (every launch of backward 1 tested) on `diffsim_ball --num-frames 3` vs "
            f"plain python | **{b['ratio']:.2f}×** ({b['exec']:.2f} s vs {b['python']:.2f} s, {b['launches']} "
            f"launches) | ≤ 5× | {ok(b['ratio'] <= 5)} |"
        )
    return rows


def only(ids: list[str], args) -> str:
    """The rows ``ids`` alone, measured and printed as a short table (no other benchmark runs)."""
    import newton
    import warp as wp

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    results: dict = {}
    if "E3" in ids:
        results["e3"] = fit_loop(args.long_rounds, tuple(args.fit_sizes))
    if "E4" in ids:
        results["e4"] = small_kernel(args.rounds)
    if "E5" in ids:
        results["e5"] = diffsim(args.long_rounds)
    rows = [flat_rows(results)] if results else []
    if "B1" in ids:
        results["b1"] = blame_vs_gradcheck_tape(args.device)
    if "B2" in ids:
        results["b2"] = exec_blame(args.rounds)
    rows += blame_rows(results)
    if "E1" in ids:
        import exec_overhead

        e1 = exec_overhead.measure(rounds=args.rounds)
        rows.insert(0, f"| E1 | `gradcheck exec` on `diffsim_ball --num-frames 3` vs plain python | **{e1['ratio']:.3f}×** "
                       f"({e1['exec']:.2f} s vs {e1['python']:.2f} s) | ≤ 1.5× | {ok(e1['ratio'] <= 1.5)} |")  # fmt: skip
    if "E2" in ids:
        import long_training

        rows.insert(1 if "E1" in ids else 0, long_rows(long_training.measure((1000, 10000))))
    return (
        f"Measured {datetime.date.today().isoformat()} with `python bench/run_bench.py --only {','.join(ids)}`, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, warp-lang {wp.__version__}, newton "
        f"{newton.__version__}; rounds {args.rounds} (E4), {args.long_rounds} (E3, E5).\n\n"
        "| id | what | measured | goal | status |\n|----|------|----------|------|--------|\n" + "\n".join(rows) + "\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", default=None, help="write the results as Markdown to this file")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--only", default=None, metavar="IDS", help=f"comma-separated rows to measure alone, of {', '.join(ONLY)}"
    )
    parser.add_argument("--long-rounds", type=int, default=1, help="rounds of the long rows (E3, E5)")
    parser.add_argument(
        "--fit-sizes", type=lambda t: [int(x) for x in t.split(",")], default=list(FIT_SIZES), help="E3's sizes"
    )
    args = parser.parse_args()
    if args.only:
        ids = [x.strip().upper() for x in args.only.split(",") if x.strip()]
        unknown = [x for x in ids if x not in ONLY]
        if unknown:
            parser.error(f"--only: unknown rows {unknown}; choose from {', '.join(ONLY)}")
        text = only(ids, args)
        print(text)
        if args.output:
            Path(args.output).write_text(text, encoding="utf-8")
        return

    gradcheck = [sys.executable, "-m", "gradcheck"]
    results = {
        "help": wall([*gradcheck, "--help"], 5),
        "list": wall([*gradcheck, "list"], 5),
        "run": wall([*gradcheck, "run", "cartpole", "--device", args.device], 3),
    }
    results["s1"] = struct_audit_cost(args.device)
    results["p2"] = fd_cost(args.device)
    results["p5"] = stats_vs_copy(args.device)
    results["p1"] = p1(args.device, args.rounds)
    results["p1_frozen"] = p1(args.device, args.rounds, freeze=True)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import differential
    import exec_overhead
    import long_training

    results["differential"] = differential.measure(rounds=args.rounds)
    results["e1"] = exec_overhead.measure(rounds=args.rounds)
    results["e2"] = long_training.measure((1000, 10000, 100000))
    results["e3"] = fit_loop(args.long_rounds)
    results["e4"] = small_kernel(args.rounds)
    results["e5"] = diffsim(args.long_rounds)
    text = render(results, args)
    print(text)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")


def long_rows(e2: dict) -> str:
    """E2: per-backward cost and peak memory of a small training loop, at growing lengths."""
    rows = e2["rows"]
    sizes = ", ".join(f"{n:,}: {row['exec'][1]} MiB" for n, row in rows.items())
    plain = ", ".join(f"{row['python'][1]}" for row in rows.values())
    first, *_, last = list(rows)
    early = 1000 * (rows[list(rows)[1]]["exec"][0] - rows[first]["exec"][0]) / (list(rows)[1] - first)
    late = 1000 * (rows[last]["exec"][0] - rows[list(rows)[-2]]["exec"][0]) / (last - list(rows)[-2])
    p = e2["per_backward_ms"]
    return (
        f"| E2 | a small training loop (`bench/train_loop.py`, 2 launches an iteration) under `gradcheck exec`, "
        f"{first:,} to {last:,} backwards: per-backward cost early vs late, and peak RSS | **{early:.3f} ms vs "
        f"{late:.3f} ms** a backward (python {p['python']:.3f} ms: {e2['ratio']:.1f}× on a loop this small); exec "
        f"peak RSS {sizes} (python {plain} MiB) | flat in N | {ok(late <= 1.2 * early and max(r['exec'][1] for r in rows.values()) <= 1.1 * min(r['exec'][1] for r in rows.values()))} |"
    )


def differential_rows(results: dict) -> str:
    """P1w (cartpole) and P6 (one 16M-float param): gradcheck's cost of one more pass, from outside."""
    rows = []
    for label, r in results.items():
        ident, goal = ("P6", 1.5) if label.startswith("large") else ("P1w", 1.10)
        rows.append(
            f"| {ident} | whole-process per-pass differential (70 vs 10 passes, `--format json`) vs the bare loop over "
            f"the public contract (bench/bare_loop.py, no restore), {label} | **{r['ratio']:.3f}×** "
            f"({1000 * r['checked']:.1f} ms vs {1000 * r['bare']:.1f} ms a pass; rounds "
            f"{', '.join(f'{x:.3f}' for x in r['rounds'])}) | ≤ {goal:g}× | {ok(r['ratio'] <= goal)} |"
        )
    return "\n".join(rows)


def ok(met: bool) -> str:
    return "met" if met else "**missed**"


def _statuses(statuses: dict) -> str:
    return ", ".join(f"{n} {s}" for s, n in sorted(statuses.items(), key=lambda item: -item[1]))


def render(r: dict, args) -> str:
    import newton
    import warp as wp

    p1r, p1f = r["p1"], r["p1_frozen"]
    per_pass_bare = 1000 * p1r["bare"] / PASSES
    per_pass_diag = 1000 * p1r["diag"] / PASSES
    return f"""# Benchmarks

Measured {datetime.date.today().isoformat()} with `make bench` (`python bench/run_bench.py`), device `{args.device}`,
{os.cpu_count()} cores, {platform.processor() or platform.machine()}, Python {platform.python_version()},
warp-lang {wp.__version__}, newton {newton.__version__}. Medians over {args.rounds} rounds; every ratio compares
two timings taken in the same run.

| id | what | measured | goal | status |
|----|------|----------|------|--------|
| P1 | full diagnostics vs bare forward+backward loop, cartpole T={STEPS}, {PASSES} passes, one process | **{p1r["ratio"]:.3f}×** ({per_pass_diag:.1f} ms vs {per_pass_bare:.1f} ms per pass; rounds {", ".join(f"{x:.3f}" for x in p1r["ratios"])}) | ≤ 1.10× | {ok(p1r["ratio"] <= 1.10)} |
| P1′ | the same, with the bare loop also run under `gc.freeze()` (gradcheck's own instrumentation cost alone) | {p1f["ratio"]:.3f}× ({1000 * p1f["diag"] / PASSES:.1f} ms vs {1000 * p1f["bare"] / PASSES:.1f} ms per pass) | — | — |
| P5 | gradient statistics (norm, max, NaN/Inf/nonzero counts, checksum) of a {r["p5"]["floats"]:,}-float buffer vs `wp.copy` of it | **{r["p5"]["ratio"]:.2f}×** ({1000 * r["p5"]["stats"]:.1f} ms vs {1000 * r["p5"]["copy"]:.1f} ms) | ≤ 2× | {ok(r["p5"]["ratio"] <= 2.0)} |
| P2 | fast FD (3 random directions) vs element-wise FD over all {r["p2"]["shared"]["scalars"]} scalar params, cartpole T={STEPS}, stock | **{r["p2"]["shared"]["elements_s"] / r["p2"]["shared"]["fast_s"]:.0f}× cheaper** ({r["p2"]["shared"]["fast_s"]:.2f} s, {r["p2"]["shared"]["fast_rollouts"]} rollouts vs {r["p2"]["shared"]["elements_s"]:.1f} s, {r["p2"]["shared"]["elements_rollouts"]} rollouts) | ≥ 50× | {ok(r["p2"]["shared"]["elements_s"] / r["p2"]["shared"]["fast_s"] >= 50)} |
| P2 | the same, per-step scratch | {r["p2"]["per-step"]["elements_s"] / r["p2"]["per-step"]["fast_s"]:.0f}× ({r["p2"]["per-step"]["fast_rollouts"]} vs {r["p2"]["per-step"]["elements_rollouts"]} rollouts) | ≥ 50× | {ok(r["p2"]["per-step"]["elements_s"] / r["p2"]["per-step"]["fast_s"] >= 50)} |
| B1 | per-launch adjoint test over every launch (`gradcheck blame`) vs `warp.autograd.gradcheck_tape`, cartpole T={STEPS}, stock | **{r["p2"]["shared"]["gradcheck_tape_s"] / r["p2"]["shared"]["blame_s"]:.1f}× faster** ({r["p2"]["shared"]["blame_s"]:.1f} s vs {r["p2"]["shared"]["gradcheck_tape_s"]:.1f} s, {r["p2"]["shared"]["blame_launches"]} launches: {_statuses(r["p2"]["shared"]["blame_statuses"])}) | ≥ 10×, ≤ ~6 s | {ok(r["p2"]["shared"]["gradcheck_tape_s"] / r["p2"]["shared"]["blame_s"] >= 10 and r["p2"]["shared"]["blame_s"] <= 6.5)} |
| B1 | the same, per-step scratch (correct solver) | {r["p2"]["per-step"]["gradcheck_tape_s"] / r["p2"]["per-step"]["blame_s"]:.1f}× ({r["p2"]["per-step"]["blame_s"]:.1f} s vs {r["p2"]["per-step"]["gradcheck_tape_s"]:.1f} s; {_statuses(r["p2"]["per-step"]["blame_statuses"])}) | ≥ 10× | {ok(r["p2"]["per-step"]["gradcheck_tape_s"] / r["p2"]["per-step"]["blame_s"] >= 10)} |
{differential_rows(r["differential"])}
| E1 | `gradcheck exec` on Newton's unmodified `diffsim_ball` (`--viewer null --num-frames 3 --device cpu`) vs plain `python -m`, whole process, warm cache | **{r["e1"]["ratio"]:.3f}×** ({r["e1"]["exec"]:.2f} s vs {r["e1"]["python"]:.2f} s; rounds {", ".join(f"{x:.3f}" for x in r["e1"]["rounds"])}) | ≤ 1.5× | {ok(r["e1"]["ratio"] <= 1.5)} |
{long_rows(r["e2"])}
{flat_rows(r)}
| S1 | struct audit (tape scan + scenario walk + mirror/record checks) over {r["s1"]["fields"]:,} struct array fields and a tape of {r["s1"]["launches"]:,} launches | {r["s1"]["seconds"]:.3f} s | < 0.5 s | {ok(r["s1"]["seconds"] < 0.5)} |
| P3 | `gradcheck --help` wall time (new process) | {r["help"]:.3f} s | instant | — |
| P3 | `gradcheck list` wall time (new process, no Warp import) | {r["list"]:.3f} s | ≤ 0.3 s | {ok(r["list"] <= 0.3)} |
| P4 | warm end-to-end `gradcheck run cartpole` (new process, warm kernel cache, 5 passes) | {r["run"]:.2f} s | — | — |

The bare loop is what a user's training loop does without gradcheck: restore the params, new tape, forward,
`tape.backward(loss)`, copy every param gradient to the host, `tape.zero()`. The diagnostics loop is gradcheck's
runner (gradient statistics against pass 1, naming, the zero audit of every gradient buffer the tape reaches)
plus all checks. Both run on a freshly set-up cartpole with the heap collected after `setup()`, which is excluded
from both. gradcheck runs the passes with the post-setup heap frozen (`gc.freeze()`): with Newton loaded a full
collection costs ~0.2 s, about one pass, and would otherwise land every ~20 passes. P1′ gives the bare loop the same
freeze, so it isolates gradcheck's own per-pass work (gradient reads, the reachability walk, the zero-audit kernel).

FD at T={STEPS} (worst relative error): stock fast {r["p2"]["shared"]["fast_error"]:.2g}, element-wise {r["p2"]["shared"]["elements_worst"]:.2g};
per-step fast {r["p2"]["per-step"]["fast_error"]:.2g}, element-wise {r["p2"]["per-step"]["elements_worst"]:.2g}. `warp.autograd.gradcheck_tape`
on the same {r["p2"]["shared"]["gradcheck_tape_launches"]}-launch tape (defaults: eps 1e-4 absolute, atol 1e-3, rtol 1e-2): stock
{r["p2"]["shared"]["gradcheck_tape_s"]:.1f} s, {"passed" if r["p2"]["shared"]["gradcheck_tape_passed"] else "failed"}; per-step
{r["p2"]["per-step"]["gradcheck_tape_s"]:.1f} s, {"passed" if r["p2"]["per-step"]["gradcheck_tape_passed"] else "failed"}. It checks each
launch in isolation with the values left after the forward pass, so it cannot see the inter-step rewrites that bias
the stock solver (gradcheck's write-after-read and reentrancy probes name them), and it fails on the correct
(per-step) solver too (the field notes trace such failures to kernels like eval_rigid_tau, which accumulates into
its outputs, and the Cholesky adjoint, a deliberate no-op), so its verdict is the same for the biased and the
correct solver.

P5 on CPU: Warp runs CPU kernels on one thread without vectorising the loop; a bare float32 sum over the same
16M floats measured 42 ms here, against ~10 ms for the `memcpy` behind `wp.copy`, so no Warp CPU kernel that reads
every value can meet 2× on this machine. The stats kernel does more per value (float64 accumulation, NaN/Inf and
nonzero counts, a position-weighted checksum). On CUDA the buffer is cut into rows of 4,096 values, one thread per
row; that path has not been timed here (no GPU on this machine). What a pass pays is P6: from 4 MiB on, a CPU buffer
first tries two exact shortcuts, bitwise equal to its pass-1 reference (numpy compares 64 MiB in ~4 ms; the
reference's statistics apply) or all bits zero (a cleared gradient), so the kernel runs on pass 1 and when a
gradient really changes. On CUDA a large buffer's rows are interleaved (row r reads values r, r + R, ...), so
neighbouring threads read neighbouring values; verified on CPU (tests/test_stats.py), not timed on a GPU.

P1w and P6 are measured from outside, as a user sees them: `gradcheck run SPEC --passes N --format json` and the
bare loop as fresh processes at N = 10 and 70, (t70 - t10) / 60 per pass, so setup, compilation and the one-off
probes cancel (P6 with `--fd off --no-replay`: 124 finite-difference rollouts of a 16M-float forward would drown
the differential). gradcheck restores the params before every pass; the bare loop does not.
"""


if __name__ == "__main__":
    main()
