"""Programs without a scalar loss (issue 39, item 3): a backward seeded with ``tape.backward(grads={y: seed})`` is
judged on its seed.

The corpus is tests/programs/seeded: jvp.py (a one-shot vector-Jacobian product, every array a leaf, ``--case`` the
mistake) and as_scenario.py (the same kernels as a scenario, x and b declared). Proved here:

- an unknown loss is never a non-finite one: the seeded outputs' values and the seed are the evidence;
- NaN/Inf made by backward alone (the seeded outputs and seed finite) is an error under exec as under run, naming
  the launch; a forward that is itself non-finite keeps "the forward already produced it" (and its info);
- a zero gradient the recorded tape connects to the seeded output is explained by the launch that passes nothing
  (kernel, file:line of the construct), never "does not depend"; an array truly unconnected keeps that wording;
- the clean twin is silent under both drivers.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import TESTS

from gradcheck.checks import missing_gradient, nonfinite
from gradcheck.model.findings import Severity
from gradcheck.model.seeded import SeededBackward

CORPUS = TESTS / "programs" / "seeded"
SCRIPT, SCENARIO = str(CORPUS / "jvp.py"), str(CORPUS / "as_scenario.py")


def _captured(case: str):
    """(findings, trace) of jvp.py --case CASE under exec, in process."""
    from gradcheck.engine import verdict
    from gradcheck.engine.program_audit import audit_program

    traces = []
    judge = verdict.judge

    def keep(trace, *args):
        traces.append(trace)
        return judge(trace, *args)

    verdict.judge = keep
    try:
        result, run = audit_program(SCRIPT, ["--case", case])
    finally:
        verdict.judge = judge
    assert run.status in (None, 0) and result.error is None, run.error
    return result.findings, traces[-1]


@pytest.fixture(scope="module")
def executed():
    """Each case of jvp.py run once under exec (one Warp module for all of them)."""
    return {case: _captured(case) for case in ("clean", "cusp", "loop", "unconnected", "forward-nan")}


def _run(fault: str | None):
    import gradcheck

    report = gradcheck.check(SCENARIO, passes=2, fault=fault, fd="off", replay=False)
    (result,) = report.scenarios
    assert result.error is None, result.error
    return result.findings


def _keys(findings):
    return {(f.check, f.severity.label, f.subject) for f in findings}


def test_the_clean_twin_is_silent_under_exec_and_run(executed):
    findings, trace = executed["clean"]
    assert findings == ()
    assert trace.passes[0].loss is None
    assert trace.passes[0].seeded == SeededBackward(("y",), True, True)
    assert _run(None) == ()


def test_backward_alone_inf_on_a_seeded_backward_is_an_error_naming_the_launch(executed):
    findings, trace = executed["cusp"]
    (found,) = [f for f in findings if f.check == "nonfinite"]
    assert (found.severity, found.subject) == (Severity.ERROR, "x.grad")
    assert "seeded with grads= on y, whose values and seed were finite" in found.message
    assert "backward alone" in found.message and "not finite either" not in found.message
    assert "launch #0 cusp (jvp.py:" in found.message  # the launch that made it, with its line
    assert "training is unharmed" not in found.message
    assert found.evidence["forward_finite"] is True and found.evidence["one_shot"] is True
    assert found.evidence["loss"] is None and found.evidence["seeded"] == ["y"]


def test_run_and_exec_give_the_seeded_nan_the_same_verdict(executed):
    ran = _keys(_run("cusp"))
    assert ("nonfinite", "error", "x.grad") in ran
    assert ran == _keys(executed["cusp"][0])


def test_a_forward_that_is_itself_nonfinite_keeps_its_explanation(executed):
    findings, trace = executed["forward-nan"]
    (found,) = [f for f in findings if f.check == "nonfinite"]
    assert trace.passes[0].seeded.values_finite is False
    assert found.severity == Severity.INFO  # the forward made it: nothing says backward is wrong
    assert "the seeded output (y) was not finite either: the forward pass already produced it" in found.message
    assert "find where the forward first makes a NaN/Inf" in found.hint


def test_a_zero_gradient_the_tape_connects_to_the_seed_is_explained_by_its_launch(executed):
    findings, _trace = executed["loop"]
    (found,) = [f for f in findings if f.check == "missing-gradient"]
    assert found.subject == "b.grad"
    assert "does not depend" not in found.message
    assert "its values reach the seeded output y" in found.message
    assert "square_of_sum (jvp.py:" in found.message  # the launch that passes nothing, with its call site
    assert "seeded_kernels.py:" in found.message and "`acc`" in found.message  # the construct, with its line
    assert found.evidence["break"]["cause"] == "wrong-adjoint"
    # a construct the running Warp differentiates wrongly, in a program that updates nothing: a warning
    assert found.severity == Severity.WARNING


def test_run_names_the_same_launch_for_a_declared_param():
    (found,) = [f for f in _run("loop") if f.check == "missing-gradient"]
    assert (found.severity, found.subject) == (Severity.ERROR, "b.grad")  # declared: an error, as before
    assert "every link to the seeded output y is on the tape" in found.message
    assert "square_of_sum (as_scenario.py:" in found.message and "seeded_kernels.py:" in found.message


def test_an_array_truly_unconnected_to_the_seed_keeps_does_not_depend(executed):
    findings, _trace = executed["unconnected"]
    (found,) = [f for f in findings if f.check == "missing-gradient"]
    assert (found.severity, found.subject) == (Severity.INFO, "w.grad")
    assert "the seeded output y does not depend on them" in found.message


# -- the checks alone, on a hand-made trace: the rules, not the probes ------------------------------------------


def test_an_unknown_loss_is_never_called_non_finite(executed):
    """A backward whose forward nothing could read (no loss, no seeded values): no word on the forward, an info."""
    _findings, trace = executed["cusp"]
    unknown = replace(trace, passes=tuple(replace(r, seeded=SeededBackward(("y",), None, True)) for r in trace.passes))
    (found,) = nonfinite.check(unknown)
    assert found.severity == Severity.INFO
    assert "not finite either" not in found.message and "could not be read" in found.message
    bare = replace(trace, passes=tuple(replace(r, seeded=None) for r in trace.passes))
    (found,) = nonfinite.check(bare)
    assert "the loss is unknown" in found.message and "not finite either" not in found.message


def test_a_seeded_leaf_in_a_program_that_trains_stays_an_info(executed):
    """A leaf's backward-alone NaN is harmless when the program updates other arrays from their gradients."""
    from gradcheck.model.trace import UPDATED

    _findings, trace = executed["cusp"]
    trained = replace(trace, params=tuple(replace(p, role=UPDATED) if p.name == "b" else p for p in trace.params))
    (found,) = nonfinite.check(trained)
    assert found.severity == Severity.INFO and "training is unharmed" in found.message


def test_the_explain_texts_say_the_rules():
    assert "grads=" in nonfinite.EXPLAIN and "never taken for a non-finite one" in nonfinite.EXPLAIN
    assert "seeded output" in missing_gradient.EXPLAIN
