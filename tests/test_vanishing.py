"""vanishing warns only on evidence that a param cannot train (issue 39, item 2).

The corpus is tests/programs/vanishing (vanishing_model.py): a gated line fit whose ``p.drag`` coefficient is in the wrong
units under the ``drag-units`` mistake, beside a layer whose saturated gate ``p.layer.bias`` is as faint as the
mistaken drag while its weight trains; and a float64 offset whose gradient falls to 2e-10 as the loss reaches 0.01.
Each mistake as a scenario (``gradcheck run``) and as a script (``gradcheck exec``), judged alike; the rules on
hand-built traces below.
"""

from __future__ import annotations

import math

import pytest
from conftest import TESTS, audited

from gradcheck.checks import vanishing
from gradcheck.model.findings import Severity
from gradcheck.model.trace import DECLARED, NormSample, ParamTrace, Trace

CORPUS = TESTS / "programs" / "vanishing"
SCENARIO = str(CORPUS / "as_scenario.py")


def _run(fault: str | None, passes: int) -> set[tuple[str, str, str]]:
    import gradcheck

    report = gradcheck.check(SCENARIO, passes=passes, fault=fault, fd="off", replay=False)
    (result,) = report.scenarios
    assert result.error is None, result.error
    return _found(result)


def _exec(program: str, *argv: str):
    return audited(CORPUS / program, *argv)


def _found(result) -> set[tuple[str, str, str]]:
    """This check's findings (the corpus is clean for the others, which their own tests judge)."""
    return {(f.check, f.severity.label, f.subject) for f in result.findings if f.check == vanishing.NAME}


DRAG = ("vanishing", "warning", "p.drag.grad")


def test_a_coefficient_in_the_wrong_units_is_vanishing_under_run_and_exec_alike():
    """Only the drag: the saturated gate's bias is as faint (sensitivity ~1e-10) but its layer's weight trains."""
    assert _run("drag-units", passes=3) == {DRAG}
    result = _exec("train.py", "--mistake", "drag-units")
    assert _found(result) == {DRAG}
    (finding,) = [f for f in result.findings if f.check == vanishing.NAME]
    assert finding.severity == Severity.WARNING
    assert finding.evidence["backwards"] == [1, 2, 3, 4, 5]  # from the first backward on, every one
    assert finding.evidence["sensitivity"] < 1e-10 and finding.evidence["scale"] == pytest.approx(2.0)
    assert "on backward 1" in finding.message and "all 5 backwards" in finding.message


def test_the_clean_fit_is_silent_under_run_and_exec():
    assert _run(None, passes=3) == set()
    assert _found(_exec("train.py")) == set()


def test_fewer_than_three_backwards_are_no_verdict():
    assert _run("drag-units", passes=2) == set()
    assert _found(_exec("train.py", "--mistake", "drag-units", "--iterations", "1")) == set()
    assert _found(_exec("train.py", "--mistake", "drag-units", "--iterations", "2")) == set()


def test_a_param_converging_to_its_optimum_is_silent():
    """The issue's false warning: a gradient of 2e-10 against a loss of 0.01 at the end, healthy at the start."""
    result = _exec("converge.py")
    (param,) = result.params
    last_norm, last_loss = param.norms[-1], result.losses[-1]
    assert last_norm / last_loss < 1e-7  # what the old rule (last pass only) flagged
    assert param.norms[0] / result.losses[0] > 1e-7  # the loss saw it on the first backward
    assert _found(result) == set()


# -- the rules, on hand-built traces ---------------------------------------------------------------------------------


def _param(subject, norms, losses=None, value_norm=1.0, shape=(1,)):
    losses = losses or [1.0] * len(norms)
    history = tuple(NormSample(i + 1, n, loss) for i, (n, loss) in enumerate(zip(norms, losses)))
    name = subject.removesuffix(".grad")
    return ParamTrace(name, subject, shape, "float32", (), value_norm, DECLARED, history, measured=len(norms))


def _subjects(*params, fixed=False):
    trace = Trace(scenario="t", fault=None, device="cpu", params=params, fixed_params=fixed)
    return [f.subject for f in vanishing.check(trace)]


def test_every_backward_must_be_faint_from_the_first():
    assert _subjects(_param("drag.grad", [1e-12] * 3)) == ["drag.grad"]
    assert _subjects(_param("drag.grad", [1e-3, 1e-12, 1e-12])) == []  # visible at first: it trained
    assert _subjects(_param("drag.grad", [1e-12, 1e-3, 1e-12])) == []
    assert _subjects(_param("drag.grad", [1e-12] * 2)) == []
    assert _subjects(_param("drag.grad", [0.0, 1e-12, 0.0])) == ["drag.grad"]  # zero is at least as faint
    assert _subjects(_param("drag.grad", [0.0] * 3)) == []  # exactly zero: missing-gradient


def test_each_backward_is_judged_against_its_own_loss():
    """|g| 1e-9: faint against a loss of 1 (the first backward), not against 1e-3 later; the largest loss of the
    run (the old rule's denominator) would make the later ones look fainter still."""
    assert _subjects(_param("b.grad", [1e-9] * 3, [1.0, 1e-3, 1e-3])) == []
    assert _subjects(_param("b.grad", [1e-9] * 3, [1.0, 1.0, 1e5])) == ["b.grad"]


def test_an_unknown_or_non_finite_loss_or_gradient_is_no_verdict():
    assert _subjects(_param("d.grad", [1e-12] * 3, [1.0, None, 1.0])) == []
    assert _subjects(_param("d.grad", [1e-12] * 3, [1.0, math.inf, 1.0])) == []
    assert _subjects(_param("d.grad", [1e-12, math.nan, 1e-12])) == []


def test_one_param_of_a_layer_whose_siblings_train_is_silent():
    weight, bias = _param("model.fc.weight.grad", [1.0] * 3), _param("model.fc.bias.grad", [1e-12] * 3)
    assert _subjects(weight, bias) == []
    assert _subjects(_param("layers[1].weight.grad", [1.0] * 3), _param("layers[1].bias.grad", [1e-12] * 3)) == []
    # another layer's weight is no sibling, and no layer trains when all of its params are faint
    assert _subjects(_param("model.out.weight.grad", [1.0] * 3), bias) == ["model.fc.bias.grad"]
    both = _subjects(_param("model.fc.weight.grad", [1e-12] * 3), bias)
    assert both == ["model.fc.weight.grad", "model.fc.bias.grad"]


def test_the_programs_root_object_is_no_layer():
    """Every array of a Warp example hangs off one object: a drag in the wrong units beside a training stiffness
    is still reported, as is a scenario's attribute."""
    assert _subjects(_param("example.stiffness.grad", [1.0] * 3), _param("example.drag.grad", [1e-12] * 3)) == [
        "example.drag.grad"
    ]
    assert vanishing.owner(_param("drag.grad", [1.0])) is None
    assert vanishing.owner(_param("p.drag.grad", [1.0])) is None
    assert vanishing.owner(_param("controls[3].grad", [1.0])) is None
    assert vanishing.owner(_param("p.layer.bias.grad", [1.0])) == "p.layer"
    assert vanishing.owner(_param("model.geo.scale.grad", [1.0])) == "model.geo"


def test_the_scale_is_the_value_norm_floored_at_a_unit_per_element():
    assert vanishing.scale(_param("x.grad", [1.0], value_norm=50.0, shape=(100,))) == 50.0
    assert vanishing.scale(_param("x.grad", [1.0], value_norm=0.0, shape=(100,))) == 10.0
    assert vanishing.scale(_param("x.grad", [1.0], value_norm=math.nan, shape=(4, 4))) == 4.0
    # a zero-initialised 100-element bias with 1e-9 on every element against a loss of 1: a unit step of each
    # element changes the loss by 1e-7 (visible); the old floor of 1 for the whole array flagged it
    flat = _param("bias.grad", [1e-9 * 10] * 3, value_norm=0.0, shape=(100,))
    assert _subjects(flat) == []
    assert _subjects(_param("bias.grad", [1e-10 * 10] * 3, value_norm=0.0, shape=(100,))) == ["bias.grad"]


def test_a_thinned_long_history_is_judged_on_its_samples():
    """A long run keeps the first, the last and every 2^k-th backward: all of them faint is the verdict."""
    history = tuple(NormSample(b, 1e-12, 1.0) for b in (1, 2, 4, 8, 16, 1000))
    p = ParamTrace("d", "d.grad", (1,), "float32", (), 1.0, DECLARED, history, measured=1000)
    (finding,) = vanishing.check(Trace(scenario="t", fault=None, device="cpu", params=(p,), fixed_params=False))
    assert finding.evidence["backwards"] == [1, 2, 4, 8, 16, 1000]
    assert "on backward 1" in finding.message and "last: norm 1e-12" in finding.message


def test_a_diverging_loop_is_not_vanishing():
    """Issue 39's diverging loop (loss 5e8 -> 4e29, gradient 7e7 -> 2e18): the old rule, the last gradient against the
    run's largest loss, flagged it; judged from the first backward on, against each backward's own loss, it is not."""
    norms, losses = [7e7, 1e10, 1e13, 1e16, 2e18], [5e8, 1e13, 1e18, 1e24, 4e29]
    assert _subjects(_param("x.grad", norms, losses, value_norm=10.0)) == []


def test_a_param_the_program_moved_is_training_however_faint():
    """Adam normalises its steps: a physically tiny but real gradient still carries the param to its optimum. Its
    value norm at the end against the one after its first update shows it moved: no verdict; unmoved, the warning."""
    import dataclasses

    faint = _param("c.grad", [1e-12] * 3, value_norm=0.1)
    assert _subjects(faint) == ["c.grad"]  # no final value known (run, or unread): judged on the gradient alone
    assert _subjects(dataclasses.replace(faint, final_value_norm=0.1)) == ["c.grad"]  # it stayed put
    assert _subjects(dataclasses.replace(faint, final_value_norm=0.9)) == []  # it moved by 0.8 of its scale


def test_adam_carrying_a_faint_param_to_its_optimum_is_silent_and_sgd_stuck_is_not():
    """adam_floor.py: every gradient is below float32's resolution against the loss's floor of 100; Adam still moves
    c from 0 to 1 (silent: it trains), plain SGD leaves it at 0 (the warning)."""
    assert _found(_exec("adam_floor.py")) == set()
    assert _found(_exec("adam_floor.py", "--sgd")) == {("vanishing", "warning", "c.grad")}
