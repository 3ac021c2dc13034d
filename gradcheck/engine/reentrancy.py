"""The reentrancy probe: backward twice on one recorded forward, every reachable gradient zeroed in between.

Warp's backward re-runs each kernel's forward code and writes the kernel's outputs again. When those outputs are
shared with other launches (scratch memory reused by every step), the second backward starts from different
values than the first, and the gradients differ: the forward values backward overwrote are named. Only
``gradcheck run`` can do this: it needs the forward recorded once more and backward run twice on it.
"""

from __future__ import annotations

from gradcheck.engine.scenario_hooks import backward, call
from gradcheck.model.trace import ReplayResult


def replay_twice(c) -> ReplayResult:
    """``c``: the post-pass ProbeContext."""
    import numpy as np
    import warp as wp

    from gradcheck.measure.fingerprints import fingerprint
    from gradcheck.tape.naming import walk
    from gradcheck.tape.reachability import LaunchLabel, reachable_gradients
    from gradcheck.tape.tape_arguments import TapeArguments
    from gradcheck.warp_compat import array_class, arrays_of, tape_launches

    with wp.ScopedDevice(c.device):
        c.restore_all()
        tape = wp.Tape()
        with tape:
            loss = call(c.name, "forward (reentrancy probe)", c.scenario.forward)
        names = walk(c.scenario)
        reachable = reachable_gradients(tape, c.params, lambda: names)
        array_type = array_class()
        arrays = list(
            {id(a): a for v in TapeArguments.of(tape).unique.values() for a in arrays_of(v, array_type)}.values()
        )

        def zero_all():
            tape.zero()
            for grad in reachable.grads:
                grad.zero_()

        def grads():
            return {k: np.array(a.grad.numpy(), dtype=np.float64) for k, a in c.params.items() if a.grad is not None}

        zero_all()
        before = [fingerprint(a) for a in arrays]
        backward(c.scenario, c.name, tape, loss)
        first = grads()
        changed = [a for a, fp in zip(arrays, before) if fingerprint(a) != fp]
        zero_all()
        backward(c.scenario, c.name, tape, loss)
        second = grads()
        diff, worst = _largest_difference(first, second)
        zero_all()
        wp.synchronize_device(c.device)

    def name_of(array):
        return names.name(array) or LaunchLabel(tape_launches(tape), array)()

    return ReplayResult(
        reentrant=worst is not None and diff > c.tolerance,
        grad_diff=diff,
        worst_param=c.subjects.get(worst, f"{worst}.grad") if worst else None,
        changed_during_backward=tuple(dict.fromkeys(name_of(a) for a in changed)),
        launches=len(tape.launches),
    )


def _largest_difference(first: dict, second: dict) -> tuple[float, str | None]:
    """The largest relative difference between two backwards' param gradients, and whose it is."""
    import numpy as np

    diff, worst = 0.0, None
    for key, g1 in first.items():
        g2 = second[key]
        scale = max(float(np.linalg.norm(g1)), 1e-30)
        d = float(np.linalg.norm(g2 - g1)) / scale if np.all(np.isfinite(g1)) and np.all(np.isfinite(g2)) else 0.0
        if not np.array_equal(g1, g2, equal_nan=True) and d >= diff:
            diff, worst = d, key
    return diff, worst
