"""Blame's fast paths change its cost, never its verdicts.

A replay moves values through numpy views of host memory (gradcheck.rerun.replay_buffers) and runs launches packed
once (``warp.Launch``, gradcheck.warp_compat.launch_commands) instead of calling ``wp.copy``, ``assign`` and
``wp.launch`` each time. Here the same recorded forward is judged with the fast paths and without them (plain Warp
calls), and the verdicts must be equal to the last digit; and a packed launch is reused only for the same kernel on
the same buffers with the same numbers (a -0.0 is not a 0.0).
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

from gradcheck.model.options import FDOptions
from gradcheck.rerun import launch_check
from gradcheck.rerun.launch_record import Launch
from gradcheck.rerun.replay_buffers import BufferPool
from gradcheck.warp_compat.launch_commands import launch_commands


@wp.kernel
def divide(x: wp.array(dtype=float), a: float, y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] / a


def _blame(fault: str | None) -> list:
    """Every launch of the ``lights`` scenario (struct arguments, an in-place update) judged as blame judges it."""
    from gradcheck.scenario.loader import load
    from gradcheck.scenario.resolve import resolve

    scenario = load(resolve("lights"))
    scenario.setup("cpu", fault=fault) if fault else scenario.setup("cpu")
    params = scenario.params()
    snapshots = {key: wp.clone(array, requires_grad=False) for key, array in params.items()}

    def restore():
        for key, array in params.items():
            wp.copy(array, snapshots[key])

    restore()
    recorder, _tape, _loss = launch_check.record_forward(scenario)
    tangents = launch_check.record_tangents(scenario, params, restore, recorder)
    verdicts = launch_check.check_launches(recorder, list(params.values()), FDOptions(), tangents=tangents)
    restore()
    return verdicts


@pytest.mark.parametrize("fault", [None, "in-place-scale", "struct-func-grad"])
def test_fast_paths_give_the_verdicts_plain_warp_calls_give(fault, monkeypatch):
    import gradcheck.rerun.replay_buffers as replay_buffers
    import gradcheck.warp_compat.launch_commands as launch_commands_module

    fast = _blame(fault)
    monkeypatch.setattr(replay_buffers, "host_views", lambda array: (None, None))  # wp.copy, assign, numpy()
    monkeypatch.setattr(launch_commands_module, "launch_commands", lambda: False)  # wp.launch every time
    plain = _blame(fault)
    assert repr(fast) == repr(plain)
    statuses = {v.kernel: v.status for v in fast}
    if fault == "struct-func-grad":  # the test can see a wrong adjoint at all
        assert "mismatch" in statuses.values(), statuses


def test_the_pool_hands_out_the_buffer_it_made_first():
    """Two units asking for the same kinds in the same order get the same buffers: what lets one unit's packed
    launches serve the next."""
    pool = BufferPool()
    source = wp.array(np.arange(4, dtype=np.float32), device="cpu")
    first, second = pool.like(source), pool.like(source)
    pool.give(second)
    pool.give(first)
    again = pool.like(source, zero=True)
    assert again is first and not again.numpy().any()
    pool.put(again, np.full(4, 2.5, dtype=np.float32))
    pool.copy(second, again)  # ``second`` is free, but any array of the kind may be written
    assert pool.values(second).tolist() == [2.5] * 4


@pytest.mark.skipif(not launch_commands(), reason="this Warp prepares no adjoint launches (before 1.7)")
def test_a_packed_launch_is_reused_only_for_the_same_arguments():
    pool = BufferPool()
    x = wp.array(np.ones(3, dtype=np.float32), device="cpu")
    y = wp.zeros(3, dtype=float, device="cpu")

    def launch(a):
        recorded = Launch(0, divide, 3, [x, a], [y], {"device": "cpu", "max_blocks": 0})
        arguments = {"inputs": [x, a], "outputs": [y], "device": "cpu", "max_blocks": 0, "record_tape": False}
        return pool.prepared.get(recorded, arguments)

    plus = launch(0.0)
    assert launch(0.0) is plus  # same kernel, same buffers, same number: packed once
    minus = launch(-0.0)
    assert minus is not plus
    plus.launch()
    assert np.all(y.numpy() == np.inf)
    minus.launch()
    assert np.all(y.numpy() == -np.inf)  # 1 / -0.0: the sign of zero reached the kernel
