"""Blame's reach: the per-launch adjoint test on launches with struct arguments, in-place updates and tiles.

The built-in scenarios ``lights`` (struct, nested-struct and array-of-structs arguments, an in-place update, a
kernel built with enable_backward=False) and ``tiles`` (``wp.launch_tiled`` and ``wp.launch(..., block_dim=)``)
each carry real wrong gradients. fd-mismatch sees every one of them today; naming the launch (adjoint-mismatch)
needs blame to replay those launches. Tests marked ``# needs blame on struct/in-place/tile launches`` state the
intended behaviour and fail until it does.
"""

from __future__ import annotations

import functools

import pytest
from conftest import ROOT, by_check, line_of

from gradcheck.model.findings import Severity

LIGHTS = ROOT / "scenarios" / "lights.py"
TILES = ROOT / "scenarios" / "tiles.py"


@functools.cache
def checked(spec: str, fault: str | None = None, blame: str = "auto"):
    """(ScenarioResult, the per-launch verdicts) of one pass on CPU. The verdicts come from the trace, where each
    carries the note saying why a launch was not checked (the report's rows keep only counts). Cached: several
    tests read the same run."""
    from gradcheck.engine import verdict
    from gradcheck.engine.pipeline import run
    from gradcheck.model.options import BlameMode, RunOptions

    seen = []
    judge = verdict.judge

    def keeping_the_trace(trace, *args, **kwargs):
        seen.append(trace)
        return judge(trace, *args, **kwargs)

    verdict.judge = keeping_the_trace
    try:
        options = RunOptions(device="cpu", passes=1, fault=fault, blame=BlameMode(blame))
        (result,) = run([spec], options).scenarios
    finally:
        verdict.judge = judge
    launch_checks = seen[0].launch_checks if seen else None
    return result, (launch_checks.verdicts if launch_checks is not None else ())


def rows(result) -> dict:
    return {row.kernel: row for row in result.blame.kernels}


def findings_at_warning(result, check: str):
    return [f for f in by_check(result.findings, check) if f.severity >= Severity.WARNING]


@pytest.mark.parametrize("spec", ["lights", "tiles"])
def test_clean_programs_have_right_adjoints(spec):
    """Clean, tested launch by launch on request: nothing disagrees, with the program or with itself."""
    result, _ = checked(spec, blame="always")
    assert result.error is None, result.error
    assert result.blame is not None and result.blame.why == "--blame always"
    assert not findings_at_warning(result, "adjoint-mismatch"), [f.message for f in result.findings]
    assert not by_check(result.findings, "fd-mismatch")


@pytest.mark.parametrize(
    ("spec", "kernels"),
    [
        ("lights", ("gather_light", "shade", "apply_vignette", "color_loss")),
        ("tiles", ("activate", "tile_error")),
    ],
)
def test_clean_programs_have_every_launch_checked(spec, kernels):
    # needs blame on struct/in-place/tile launches
    """Not silent for want of looking: every launch, struct-taking or tiled, is replayed and agrees, and each
    row names the program's own launch line (launch_tiled's included, not the line inside Warp it calls)."""
    result, _ = checked(spec, blame="always")
    assert {kernel: dict(row.statuses) for kernel, row in rows(result).items()} == {k: {"ok": 1} for k in kernels}
    path = LIGHTS if spec == "lights" else TILES
    for row in rows(result).values():
        assert f"{path.name}:" in (row.where or ""), row
    if spec == "tiles":
        launched = line_of(TILES, "wp.launch_tiled(act,")
        assert rows(result)["activate"].where.endswith(f"tiles.py:{launched}")


LIGHTS_FAULTS = ["runtime-loop", "struct-func-grad", "in-place-scale", "backward-off"]
TILES_FAULTS = ["tile-func-grad", "block-dim-func-grad"]


@pytest.mark.parametrize(
    ("spec", "fault"), [("lights", f) for f in LIGHTS_FAULTS] + [("tiles", f) for f in TILES_FAULTS]
)
def test_every_fault_is_a_wrong_gradient(spec, fault):
    """Each fault changes the gradient, not the loss: the finite differences of the whole program disagree."""
    result, _ = checked(spec, fault)
    assert result.error is None, result.error
    (fd,) = by_check(result.findings, "fd-mismatch")
    assert fd.severity == Severity.ERROR, fd.message


@pytest.mark.parametrize(
    ("fault", "kernel", "launch", "construct"),
    [
        # trip count from a struct field, lambert used after the loop: its adjoint replays lambert as 0
        ("runtime-loop", "gather_light_runtime", "wp.launch(gather,", "for k in range(lights.num_lights)"),
        # a wrong @wp.func_grad called from a kernel taking Surface: the line of the function is not asked for
        ("struct-func-grad", "shade_forgetful", "wp.launch(tone,", None),
        # a non-additive update in place: the tape replays it on the product
        (
            "in-place-scale",
            "apply_vignette_in_place",
            "wp.launch(apply_vignette_in_place,",
            "color[i] = color[i] * vignette[i]  #",
        ),
    ],
)
def test_lights_faults_are_named_by_kernel_launch_and_line(fault, kernel, launch, construct):
    # needs blame on struct/in-place/tile launches
    result, _ = checked("lights", fault)
    (wrong,) = by_check(result.findings, "adjoint-mismatch")
    assert wrong.severity == Severity.ERROR, wrong.message
    assert kernel in wrong.subject and f"lights.py:{line_of(LIGHTS, launch)}" in wrong.subject, wrong.subject
    if construct is not None:
        assert f"lights.py:{line_of(LIGHTS, construct)}" in wrong.message, wrong.message


def test_a_kernel_built_without_backward_is_listed_with_the_reason():
    # needs blame on struct/in-place/tile launches
    """gather_light_forward_only takes struct arguments and is built with enable_backward=False: blame cannot
    replay an adjoint that does not exist, and must say that (not "takes a struct argument") for that kernel.
    The row's status is being designed ("not-checked", or a status of its own): either, as long as it is no
    verdict and the reason is given."""
    result, verdicts = checked("lights", "backward-off")
    row = rows(result)["gather_light_forward_only"]
    # on the gradient path (the lights feed it, the loss reads its fragments): its own verdict, not "not checked"
    assert row.launches == 1 and row.statuses == {"no-backward": 1}, row.statuses
    (off,) = [v for v in verdicts if v.kernel == "gather_light_forward_only"]
    assert "enable_backward=False on the gradient path" in (off.note or ""), off.note
    # named as such: a warning (the cut may be meant, a stop-gradient), with the launch line and the fix
    (named,) = findings_at_warning(result, "adjoint-mismatch")
    assert named.severity == Severity.WARNING and "gather_light_forward_only" in named.subject
    assert "lights.py:" in named.subject and "remove enable_backward=False" in named.hint


@pytest.mark.parametrize(
    ("fault", "kernel", "launch"),
    [
        # needs blame on struct/in-place/tile launches (wp.launch_tiled, named by the program's line)
        ("tile-func-grad", "activate_forgetful", "wp.launch_tiled(act,"),
        # named already before the extension: a plain wp.launch with no struct argument
        ("block-dim-func-grad", "tile_error_forgetful", "wp.launch(error,"),
    ],
)
def test_tile_faults_are_named_by_kernel_and_launch(fault, kernel, launch):
    """A wrong @wp.func_grad under tile_map, in a kernel launched with wp.launch_tiled (which bypasses wp.launch)
    and in one launched with wp.launch(..., block_dim=): named with the program's own launch line."""
    result, _ = checked("tiles", fault)
    (wrong,) = by_check(result.findings, "adjoint-mismatch")
    assert wrong.severity == Severity.ERROR, wrong.message
    assert kernel in wrong.subject and f"tiles.py:{line_of(TILES, launch)}" in wrong.subject, wrong.subject
