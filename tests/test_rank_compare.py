"""The cross-rank judge (gradcheck.pytorch.rank_compare) on ranks' payloads as pytorch.ranks writes them: what agrees
within float noise, which ranks are the odd ones, and which cause a divergence is given. Pure Python (fast lane);
the real DDP jobs are in tests/test_torch_cross_rank.py."""

from __future__ import annotations

import math

from gradcheck.pytorch.rank_compare import Local, agree, compare, groups, odd_ones

F32 = 2.0**-23
G = [0.5, 3.0, 2.0, 0.25, -0.125]  # sum, sum of magnitudes, of squares, two strided sums
P = [4.0, 9.0, 12.0, 1.0, 2.0]


def _moved(stats, by):
    return [v + by for v in stats]


def _entry(gb=G, gs=G, pb=P, pa=P, eps=F32):
    return {"n": 8, "e": eps, "gb": gb, "gs": gs, "pb": pb, "pa": pa}


def _local(**kw):
    fields = {"name": "net.w", "step": "SGD.step() (train.py:9)", "reached": True, "replaced": False,
              "bypassed": False} | kw  # fmt: skip
    return {"0.0": Local(**fields)}


def test_identical_and_noise_agree_a_real_difference_does_not():
    assert agree(G, list(G), F32) == (True, 0.0)
    assert agree(G, _moved(G, 3.0 * 1e-6), F32)[0]  # 1e-6 of the scale: float noise
    same, spread = agree(G, _moved(G, 3.0 * 1e-3), F32)
    assert not same and math.isclose(spread, 1.5e-3, rel_tol=1e-2)  # the squares: 3e-3 of about 2
    assert agree(G, _moved(G, 3.0 * 1e-3), 2.0**-7)[0]  # bfloat16: 64 ulps is 0.5 of the scale
    assert agree(None, None, F32) == (True, 0.0) and not agree(G, None, F32)[0]


def test_nan_agrees_only_with_nan():
    nan = [math.nan, *G[1:]]
    assert agree(nan, list(nan), F32)[0]
    assert not agree(nan, G, F32)[0]


def test_the_odd_rank_is_the_one_outside_the_largest_group():
    found, _ = groups({0: G, 1: G, 2: _moved(G, 1.0)}, F32)
    assert odd_ones(found) == (2,)
    found, _ = groups({0: G, 1: _moved(G, 1.0)}, F32)
    assert odd_ones(found) == (0, 1)  # two ranks, two values: no majority


def test_agreeing_ranks_give_nothing():
    assert compare(1, {0: {"0.0": _entry()}, 1: {"0.0": _entry()}}, _local()) == []


def test_a_gradient_written_after_backward_names_the_warp_alias():
    payloads = {0: {"0.0": _entry()}, 1: {"0.0": _entry(gs=_moved(G, 1.0))}}
    (found,) = compare(4, payloads, _local(sites=("train.py:40",)))
    assert (found.kind, found.subject, found.ranks, found.world_size, found.site) == (
        "gradient-diverged", "net.w.grad", (0, 1), 2, "train.py:40",
    )  # fmt: skip
    assert "equal on every rank when backward returned" in found.detail and "written in place" in found.detail
    assert "train.py:40" in found.detail and "backward #4" in found.detail


def test_a_gradient_never_reduced_says_autograd_never_reached_it():
    payloads = {0: {"0.0": _entry()}, 1: {"0.0": _entry(gb=_moved(G, 1.0), gs=_moved(G, 1.0))}}
    (found,) = compare(1, payloads, _local(reached=False))
    assert "autograd never reached net.w" in found.detail and found.site is None


def test_a_backward_without_a_ddp_forward_says_the_model_ran_outside_ddp():
    payloads = {0: {"0.0": _entry()}, 1: {"0.0": _entry(gb=_moved(G, 1.0), gs=_moved(G, 1.0))}}
    (found,) = compare(1, payloads, _local(bypassed=True))
    assert "called through .module" in found.detail and "retain_graph=True" in found.detail


def test_a_parameter_frozen_when_ddp_was_built_is_named_so_with_its_fix():
    payloads = {0: {"0.0": _entry()}, 1: {"0.0": _entry(gb=_moved(G, 1.0), gs=_moved(G, 1.0))}}
    (found,) = compare(1, payloads, _local(excluded=True))
    assert "DDP left net.w out when it was built" in found.detail and "after unfreezing net.w" in found.fix


def test_a_gradient_on_some_ranks_only_is_missing_on_the_others():
    payloads = {0: {"0.0": _entry()}, 1: {"0.0": _entry(gs=None)}, 2: {"0.0": _entry()}}
    (found,) = compare(2, payloads, _local())
    assert (found.kind, found.ranks, found.world_size) == ("gradient-missing", (1,), 3)


def test_a_parameter_written_before_the_step_and_one_the_step_made_differ():
    written = {0: {"0.0": _entry()}, 1: {"0.0": _entry(pb=_moved(P, 1.0), pa=_moved(P, 1.0))}}
    (found,) = compare(3, written, _local(param_sites=("train.py:77",)))
    assert (found.kind, found.subject, found.site) == ("parameter-diverged", "net.w", "train.py:77")
    assert "before SGD.step()" in found.detail
    stepped = {0: {"0.0": _entry()}, 1: {"0.0": _entry(pa=_moved(P, 1.0))}}
    (found,) = compare(3, stepped, _local())
    assert "the step makes it differ" in found.detail


def test_a_parameter_whose_gradient_diverged_is_not_reported_twice():
    payloads = {0: {"0.0": _entry()}, 1: {"0.0": _entry(gs=_moved(G, 1.0), pa=_moved(P, 1.0))}}
    assert [f.kind for f in compare(1, payloads, _local())] == ["gradient-diverged"]


def test_a_parameter_not_on_every_rank_or_of_another_size_is_no_verdict():
    assert compare(1, {0: {"0.0": _entry()}, 1: {}}, _local()) == []
    other = _entry(gs=_moved(G, 1.0)) | {"n": 9}
    assert compare(1, {0: {"0.0": _entry()}, 1: {"0.0": other}}, _local()) == []
