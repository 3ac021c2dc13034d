"""The in-process rows: P1 (the diagnostics loop against a bare loop, same process), P5 (gradient statistics
against a copy) and S1 (the struct audit). bench/gpu_rows.py runs the same loops on CUDA.

P1  full diagnostics (runner + checks) vs a bare forward+backward loop, cartpole T=100, 20 passes, same process,
    same scenario object; goal <= 1.10x. P1' gives the bare loop gradcheck's gc.freeze().
P5  on-device statistics of a 16M-float gradient buffer vs a wp.copy of it; goal <= 2x.
S1  struct audit over 10,000 struct array fields and 10,000 launches; goal < 0.5 s.
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from pathlib import Path

from rows import Row, at_most, ok, rounds_text

HERE = Path(__file__).resolve().parent
PASSES = 20
STEPS = "100"


def cartpole():
    from gradcheck.scenarios.cartpole import CartPole

    return CartPole()


def bare_loop(device: str, passes: int, freeze: bool = False, make=cartpole, options=None) -> float:
    """What a user's loop does without gradcheck: restore, tape, forward, backward, read grads, zero.

    Runs on a freshly set-up scenario (``make()``, set up with ``options``), like the diagnostics loop (first passes
    over new arrays are slower).
    """
    from gradcheck.warp_compat import load_warp

    wp = load_warp()
    scenario = make()
    with wp.ScopedDevice(device):
        scenario.setup(device, **({"steps": STEPS} if options is None else options))
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


def diagnostics_loop(device: str, passes: int, make=cartpole, options=None, expected=("write-after-read",)) -> float:
    """gradcheck's runner and checks over the same passes; setup() excluded (timed per pass). ``expected``: the only
    checks allowed to report (the stock cartpole shares its solver scratch across steps: write-after-read; None:
    any, for a scenario timed, not judged)."""
    from gradcheck.checks import run_checks
    from gradcheck.engine.runner import run_passes

    scenario = _CollectAfterSetup(make())
    options = {"steps": STEPS} if options is None else options
    trace = run_passes(scenario, name="bench", device=device, passes=passes, options=options)
    started = time.perf_counter()
    findings = run_checks(trace)
    checks = time.perf_counter() - started
    unexpected = [] if expected is None else [f for f in findings if f.check not in expected]
    assert not unexpected, f"the benchmark's scenario is not clean: {unexpected[:3]}"
    return sum(p.seconds for p in trace.passes) + checks


def p1(device: str, rounds: int, freeze: bool = False, passes: int = PASSES, **scenario) -> dict:
    """Rounds of bare, diagnostics, bare: the ratio uses the mean of the two bare runs around it, so slow drifts of
    the machine (frequency, the other core) cancel. ``scenario``: make/options (cartpole T=100 by default)."""
    expected = scenario.pop("expected", ("write-after-read",))
    bare_loop(device, 2, **scenario)  # warm-up: kernels loaded from the cache, caches hot
    diagnostics_loop(device, 2, expected=expected, **scenario)
    ratios, bares, diags = [], [], []
    for _ in range(rounds):
        before = bare_loop(device, passes, freeze, **scenario)
        diag = diagnostics_loop(device, passes, expected=expected, **scenario)
        after = bare_loop(device, passes, freeze, **scenario)
        bare = (before + after) / 2
        bares.append(bare)
        diags.append(diag)
        ratios.append(diag / bare)
    return {
        "bare": statistics.median(bares) / passes,
        "diag": statistics.median(diags) / passes,
        "ratio": statistics.median(ratios),
        "ratios": ratios,
    }


def p1_rows(args) -> list[Row]:
    r = p1(args.device, args.rounds)
    f = p1(args.device, args.rounds, freeze=True)
    goal, status = at_most(r["ratio"], 1.10)
    return [
        Row(
            "P1",
            f"full diagnostics vs bare forward+backward loop, cartpole T={STEPS}, {PASSES} passes, one process",
            f"**{r['ratio']:.3f}×** ({1000 * r['diag']:.1f} ms vs {1000 * r['bare']:.1f} ms per pass; rounds "
            f"{rounds_text(r['ratios'])})",
            goal,
            status,
            value=r["ratio"],
            rounds=tuple(r["ratios"]),
            extra={"diag_ms": 1000 * r["diag"], "bare_ms": 1000 * r["bare"]},
        ),
        Row(
            "P1-frozen",
            "the same, with the bare loop also run under `gc.freeze()` (gradcheck's own instrumentation cost alone)",
            f"{f['ratio']:.3f}× ({1000 * f['diag']:.1f} ms vs {1000 * f['bare']:.1f} ms per pass)",
            value=f["ratio"],
            rounds=tuple(f["ratios"]),
            label="P1′",
        ),
    ]


def struct_audit_cost(device: str, repeat: int = 3) -> dict:
    """S1: walk + tape scan + struct audit over 10,000 array fields and 10,000 launches."""
    sys.path.insert(0, str(HERE))
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
    return {"seconds": statistics.median(times), "times": times, "launches": len(tree.tape.launches)}


def s1_rows(args) -> list[Row]:
    r = struct_audit_cost(args.device)
    return [
        Row(
            "S1",
            f"struct audit (tape scan + scenario walk + mirror/record checks) over 10,000 struct array fields and a "
            f"tape of {r['launches']:,} launches",
            f"{r['seconds']:.3f} s",
            "< 0.5 s",
            ok(r["seconds"] < 0.5),
            value=r["seconds"],
            unit="s",
            rounds=tuple(r["times"]),
        )
    ]


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


def p5_rows(args) -> list[Row]:
    r = stats_vs_copy(args.device)
    goal, status = at_most(r["ratio"], 2.0)
    return [
        Row(
            "P5",
            f"gradient statistics (norm, max, NaN/Inf/nonzero counts, checksum) of a {r['floats']:,}-float buffer vs "
            "`wp.copy` of it",
            f"**{r['ratio']:.2f}×** ({1000 * r['stats']:.1f} ms vs {1000 * r['copy']:.1f} ms)",
            goal,
            status,
            value=r["ratio"],
        )
    ]
