"""P2 (fast directional finite differences against element-wise ones) and B1 (`gradcheck blame`'s per-launch
adjoint test against `warp.autograd.gradcheck_tape`), cartpole T=100, in process, each measured in one run.

P2  fast FD (3 random directions) vs element-wise FD over every scalar param, stock and per-step scratch; >= 50x.
B1  the per-launch adjoint test over every launch vs gradcheck_tape on the same tape, stock; >= 30x faster.
"""

from __future__ import annotations

import contextlib
import io
import time

from rows import Row, ok

STEPS = "100"


def _set_up(device: str, scratch: str, steps: str = STEPS):
    """A cartpole set up with ``scratch``, its params and their snapshots."""
    from gradcheck.scenarios.cartpole import CartPole
    from gradcheck.warp_compat import load_warp

    wp = load_warp()
    scenario = CartPole()
    scenario.setup(device, steps=steps, scratch=scratch)
    params = scenario.params()
    snapshots = {k: wp.clone(a, requires_grad=False) for k, a in params.items()}
    return scenario, params, snapshots


def element_wise(scenario, params: dict, snapshots: dict, grads: dict) -> tuple[float, int]:
    """(worst relative error, rollouts) of element-wise FD over every scalar of every param."""
    import numpy as np

    from gradcheck.model.options import FDOptions
    from gradcheck.rerun.finite_diff import Judge, Rollouts, param_scale

    rollouts = Rollouts(scenario, params, snapshots)
    judge = Judge(rollouts, rollouts.loss({}), FDOptions())
    worst = 0.0
    for key, g in grads.items():
        scale = param_scale(rollouts.x0[key])
        floor = 1e-2 * float(np.max(np.abs(g))) * scale
        for index in np.ndindex(g.shape):
            delta = {key: np.zeros_like(rollouts.x0[key])}
            delta[key][index] = scale
            worst = max(worst, judge.probe("e", float(g[index]) * scale, delta, floor).rel_error)
    return worst, rollouts.count


def fd_cost(device: str, scratch: str) -> dict:
    """P2 on one cartpole variant: the fast FD and the element-wise FD, same scenario, same run."""
    import numpy as np

    from gradcheck.model.options import FDOptions
    from gradcheck.rerun.finite_diff import run_fd
    from gradcheck.warp_compat import load_warp

    wp = load_warp()
    with wp.ScopedDevice(device):
        scenario, params, snapshots = _set_up(device, scratch)
        tape = wp.Tape()
        with tape:
            loss = scenario.forward()
        tape.backward(loss)
        grads = {k: a.grad.numpy().astype(np.float64) for k, a in params.items()}
        started = time.perf_counter()
        fast = run_fd(scenario, params, snapshots, grads, FDOptions(auto_elements=False))
        fast_s = time.perf_counter() - started
        started = time.perf_counter()
        worst, rollouts = element_wise(scenario, params, snapshots, grads)
        elements_s = time.perf_counter() - started
    return {
        "scalars": sum(g.size for g in grads.values()),
        "fast_s": fast_s,
        "fast_rollouts": fast.rollouts,
        "fast_error": fast.max_direction_error,
        "elements_s": elements_s,
        "elements_rollouts": rollouts,
        "elements_worst": worst,
    }


def p2_rows(args) -> list[Row]:
    rows = []
    for scratch, key in (("shared", "P2"), ("per-step", "P2-per-step")):
        r = fd_cost(args.device, scratch)
        cheaper = r["elements_s"] / r["fast_s"]
        what = (
            f"fast FD (3 random directions) vs element-wise FD over all {r['scalars']} scalar params, cartpole "
            f"T={STEPS}, " + ("stock" if scratch == "shared" else "per-step scratch")
        )
        measured = (
            f"**{cheaper:.0f}× cheaper** ({r['fast_s']:.2f} s, {r['fast_rollouts']} rollouts vs "
            f"{r['elements_s']:.1f} s, {r['elements_rollouts']} rollouts; worst relative error fast "
            f"{r['fast_error']:.2g}, element-wise {r['elements_worst']:.2g})"
        )
        rows.append(Row(key, what, measured, "≥ 50×", ok(cheaper >= 50), value=cheaper, better="higher", label="P2"))
    return rows


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


def blame_vs_gradcheck_tape(device: str, scratch: str = "shared") -> dict:
    """B1: the per-launch adjoint test over every launch of cartpole and warp.autograd.gradcheck_tape on the same
    tape, measured in one run."""
    from warp.autograd import gradcheck_tape as warp_gradcheck_tape

    from gradcheck.warp_compat import load_warp

    wp = load_warp()
    with wp.ScopedDevice(device):
        scenario, params, snapshots = _set_up(device, scratch)
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


def statuses_text(statuses: dict) -> str:
    return ", ".join(f"{n} {s}" for s, n in sorted(statuses.items(), key=lambda item: -item[1]))


def b1_rows(args) -> list[Row]:
    b = blame_vs_gradcheck_tape(args.device)
    ratio = b["gradcheck_tape_s"] / b["blame_s"]
    verdict = "passed" if b["gradcheck_tape_passed"] else "failed"
    return [
        Row(
            "B1",
            "per-launch adjoint test over every launch (`gradcheck blame`, struct arguments and in-place launches "
            f"included) vs `warp.autograd.gradcheck_tape`, cartpole T={STEPS}, stock",
            f"**{ratio:.1f}× faster** ({b['blame_s']:.1f} s vs {b['gradcheck_tape_s']:.1f} s, {b['blame_launches']} "
            f"launches: {statuses_text(b['blame_statuses'])}; gradcheck_tape {verdict} on its "
            f"{b['gradcheck_tape_launches']}-launch tape)",
            "≥ 30×",
            ok(ratio >= 30),
            value=ratio,
            better="higher",
            extra={"blame_s": b["blame_s"], "gradcheck_tape_s": b["gradcheck_tape_s"]},
        )
    ]
