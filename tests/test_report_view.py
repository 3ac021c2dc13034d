"""The table a person reads on one screen: findings of one check and one cause are one row (subjects worst
first, the first few named, the rest counted, the fix said once), nothing leaves the view uncounted, and
``verbose`` still shows every finding's full message. The findings are built with the checks' own evidence
types (a renamed field fails here; tests/test_typed_evidence.py groups real check output). Then real runs: the
built-in faults' default views fit one screen at 100 columns."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from conftest import cli

from gradcheck.checks.missing_gradient import MissingParamGradient
from gradcheck.checks.vanishing import VanishingEvidence
from gradcheck.checks.zero_audit import ZeroAuditEvidence
from gradcheck.formats import table
from gradcheck.formats.finding_groups import MAX_SHOWN, group_findings, measure
from gradcheck.model.findings import Finding, Severity
from gradcheck.model.report import BlameSummary, KernelBlame, ParamSummary, Report, ScenarioResult

ONE_SCREEN = 60  # lines a default view may take
SCREEN_WIDTH = "100"  # COLUMNS for the real runs (stdout is not a tty)
WIDTH = int(SCREEN_WIDTH)
MISSED = "the zero step misses this buffer: call tape.zero() on the tape that ran backward, after reading gradients"
SURVIVORS = 9  # zero-audit findings of one cause, more than MAX_SHOWN + 1 so the row counts the rest
EXPLAIN = "(gradcheck explain {})"


def _survived(subjects: list[str], norms: list[float]) -> ZeroAuditEvidence:
    """zero-audit's evidence for a family of survivors (``subjects``), the worst's norms after each zero step."""
    return ZeroAuditEvidence("scenario.zero(tape)", 1, norms, "kernel argument", [], subjects, len(subjects), [], None,
                             1, None, [1, 2], 2)  # fmt: skip


def _survivor(i: int, norm: float) -> Finding:
    return Finding(
        check="zero-audit",
        severity=Severity.WARNING,
        subject=f"solver.buffer_{i}.grad",
        message=f"nonzero after scenario.zero(tape) from pass 1 on: norm {norm:.4g}, 3 of 8 values (survivor {i})",
        hint=MISSED,
        evidence=_survived([f"solver.buffer_{i}.grad"], [norm / 2, norm]),
    )


def _missing(subject: str, hint: str) -> Finding:
    return Finding(
        check="missing-gradient",
        severity=Severity.ERROR,
        subject=subject,
        message=f"gradient is exactly zero on every pass that ran (5) for {subject}",
        hint=hint,
        evidence=MissingParamGradient("all-zero", [subject.removesuffix(".grad")], [subject], 1, 1, "declared"),
    )


def _param(subject: str, verdict: str = "ok") -> ParamSummary:
    return ParamSummary(subject.removesuffix(".grad"), subject, (4,), "float32", (1.0, 1.0), verdict)


def _report(findings, params=(), blame=None) -> Report:
    result = ScenarioResult(
        spec="demo",
        name="demo",
        device="cpu",
        passes=2,
        params=tuple(params),
        findings=tuple(findings),
        losses=(1.0, 1.0),
        blame=blame,
    )
    return Report(environment={"gradcheck": "test", "device": "cpu"}, scenarios=(result,))


def _view(report, verbose: bool = False) -> str:
    return table.render(report, color=False, width=WIDTH, verbose=verbose)


# norms deliberately out of order, so worst-first is the renderer's doing
NORMS = [3.0, 70.0, 0.5, 12.0, 900.0, 1.5, 44.0, 8.0, 0.01]
SURVIVING = [_survivor(i, norm) for i, norm in enumerate(NORMS)]


def test_findings_of_one_check_and_cause_are_one_row_with_the_fix_once():
    flat = " ".join(_view(_report(SURVIVING)).split())  # the row wraps over lines
    assert f"{SURVIVORS} findings, worst first" in flat
    assert f"+{SURVIVORS - MAX_SHOWN} more" in flat
    assert flat.count(MISSED) == 1 and flat.count(EXPLAIN.format("zero-audit")) == 1
    worst = max(SURVIVING, key=lambda f: measure(f).value)
    shown = [f for f in SURVIVING if f.message in flat]
    assert shown == [worst]  # a group names subjects, and says only the worst one's message


def test_subjects_are_listed_worst_first_with_their_numbers():
    (group,) = group_findings(SURVIVING)
    ranked = sorted(range(SURVIVORS), key=lambda i: -NORMS[i])
    assert [m.finding.subject for m in group.members] == [f"solver.buffer_{i}.grad" for i in ranked]
    flat = " ".join(_view(_report(SURVIVING)).split())
    shown = [f"solver.buffer_{i}.grad (norm {NORMS[i]:.3g})" for i in ranked[:MAX_SHOWN]]
    positions = [flat.index(entry) for entry in shown]
    assert positions == sorted(positions)


def test_no_finding_leaves_the_view_uncounted():
    flat = " ".join(_view(_report(SURVIVING)).split())
    named = [f for f in SURVIVING if f"{f.subject} (" in flat]
    more = int(re.search(r"\+(\d+) more", flat).group(1))
    assert len(named) + more == SURVIVORS


def test_a_group_one_over_the_limit_names_everyone():
    """Naming one more subject costs no more than "+1 more"."""
    text = " ".join(_view(_report(SURVIVING[: MAX_SHOWN + 1])).split())
    assert "more" not in text and all(f.subject in text for f in SURVIVING[: MAX_SHOWN + 1])


def test_different_fixes_stay_different_rows_and_a_single_finding_keeps_its_message():
    first = _missing("lights.dirs.grad", "build gather_light with enable_backward=True")
    second = _missing("surface.albedo.grad", "read the array under the tape, after it got its final .grad")
    flat = " ".join(_view(_report([first, second])).split())
    for finding in (first, second):
        assert finding.message in flat and finding.hint in flat
    assert flat.count(EXPLAIN.format("missing-gradient")) == len((first, second))


def test_the_same_fix_at_another_severity_or_site_is_another_cause():
    warning = Finding("zero-audit", Severity.INFO, "x.grad", "nonzero after the zero step: norm 1", MISSED)
    assert len(group_findings([SURVIVING[0], warning])) == len((SURVIVING[0], warning))
    here = Finding("adjoint-mismatch", Severity.ERROR, "launch #0 k", "wrong", "at k.py:10: add instead of assign")
    there = Finding("adjoint-mismatch", Severity.ERROR, "launch #1 k", "wrong", "at k.py:20: add instead of assign")
    assert len(group_findings([here, there])) == len((here, there))  # a line number in a fix is not the subject


def test_fixes_that_differ_only_in_their_subject_are_one_cause():
    """Each says the same about its own array: one row, the worst's fix shown, said to hold for the others."""
    hint = "allocate {} once, before the tape, and hand that array to the optimizer"
    findings = [_missing(f"states[{i}].joint_q.grad", hint.format(f"states[{i}].joint_q")) for i in range(3)]
    (group,) = group_findings(findings)
    assert len(group.members) == len(findings)
    flat = " ".join(_view(_report(findings)).split())
    assert hint.format("states[0].joint_q") in flat and "the same for the others" in flat


def test_a_short_subject_is_not_replaced_inside_other_words():
    x = Finding("changed-before-backward", Severity.ERROR, "x", "changed", "change x only after backward (extra)")
    y = Finding("changed-before-backward", Severity.ERROR, "y", "changed", "change y only after backward (extra)")
    assert len(group_findings([x, y])) == 1
    z = Finding("changed-before-backward", Severity.ERROR, "x", "changed", "change x only after backward (extrb)")
    assert len(group_findings([x, z])) == len((x, z))


def test_the_number_comes_from_the_evidence_never_from_the_message():
    assert measure(SURVIVING[4]).text == "norm 900"
    loose = Finding("mystery", Severity.WARNING, "a.grad", "something odd: norm 2.5e+03 left over", "look")
    assert measure(loose) is None  # evidence given as a mapping ranks nothing: no view guesses from text or keys
    assert measure(Finding("mystery", Severity.WARNING, "a.grad", "m", "look", {"peak": 3.0})) is None


def test_a_smaller_number_can_be_the_worse_one():
    def faint(subject, sensitivity):
        evidence = VanishingEvidence(sensitivity, 1e-9, 1.0, 1.0, 1.0, [1], [1e-9], [1.0], 1e-7, [subject])
        return Finding("vanishing", Severity.WARNING, subject, "tiny", "rescale", evidence)

    (group,) = group_findings([faint("a.grad", 1e-9), faint("b.grad", 1e-14)])
    assert [m.finding.subject for m in group.members] == ["b.grad", "a.grad"]


def test_a_finding_for_a_family_says_how_many_arrays_it_stands_for():
    family = Finding(
        "zero-audit",
        Severity.WARNING,
        "states[1].body_f.grad",
        "100 arrays states[*].body_f.grad, worst shown: nonzero: norm 5000",
        MISSED,
        _survived([f"states[{i}].body_f.grad" for i in range(100)], [5000.0]),
    )
    flat = " ".join(_view(_report([*SURVIVING, family])).split())
    assert f"{SURVIVORS + 1} findings, worst first: states[*].body_f.grad ×100 (norm 5e+03)" in flat


def test_verbose_shows_every_finding_with_its_full_message():
    flat = " ".join(_view(_report(SURVIVING), verbose=True).split())
    assert all(f.message in flat and f.subject in flat for f in SURVIVING)
    assert flat.count(EXPLAIN.format("zero-audit")) == SURVIVORS


def test_long_params_and_kernel_tables_count_what_they_leave_out():
    params = [_param(f"p{i}.grad") for i in range(table.PARAM_ROWS + 3)] + [_param("late.grad", "vanishing")]
    kernels = tuple(
        KernelBlame(f"kernel_{i}", "k.py:1", 1, {"mismatch" if i == 0 else "ok": 1}, 0.0, None)
        for i in range(table.BLAME_ROWS + 2)
    )
    blame = BlameSummary("fd-mismatch fired", None, None, 0.1, kernels)
    text = _view(_report([], params, blame))
    assert "late.grad" in text  # a flagged param is listed before ok ones
    assert f"+{len(params) - table.PARAM_ROWS} more param gradient(s), 0 flagged" in text
    assert f"+{len(kernels) - table.BLAME_ROWS} more kernel(s), 0 with wrong launches" in text
    everything = _view(_report([], params, blame), verbose=True)
    assert "more param" not in everything and all(p.subject in everything for p in params)
    assert all(k.kernel in everything for k in kernels)


@dataclass(frozen=True)
class _Suppressed(Report):
    """A report whose suppressions left findings out (what ``report.ignored`` holds)."""

    ignored: tuple = ()


def test_the_summary_counts_ignored_findings_when_there_are_some():
    plain = _view(_report(SURVIVING[:1])).rstrip().splitlines()[-1]
    assert "ignored" not in plain and plain.startswith("1 scenario(s), 0 error(s), 1 warning(s)")
    base = _report(SURVIVING[:1])
    suppressed = _Suppressed(base.environment, base.scenarios, ignored=tuple(SURVIVING[1:3]))
    summary = _view(suppressed).rstrip().splitlines()[-1]
    assert ", 2 ignored" in summary


def _default_view(scenario: str, fault: str | None, *extra: str) -> str:
    args = ["run", scenario, "--quiet", *extra] + (["--fault", fault] if fault else [])
    proc = cli(*args, env={"COLUMNS": SCREEN_WIDTH})
    assert "scenario(s)" in proc.stdout, proc.stderr[-3000:]
    return proc.stdout


# among the longest views before findings were grouped (169 and 63 lines; the longest now, 56). The cartpole case
# (~12 s warm, a Newton rollout with its probes) is the long lane's, as is every other fault (the test below); the
# fast lane keeps the pure-Warp one, which folds findings the same way.
LONGEST = [
    pytest.param("cartpole", "no-zero", marks=pytest.mark.slow),
    ("lights", "backward-off"),
]


@pytest.mark.parametrize("scenario,fault", LONGEST)
def test_the_longest_built_in_faults_fit_one_screen(scenario, fault):
    text = _default_view(scenario, fault, "--passes", "2")
    assert len(text.splitlines()) <= ONE_SCREEN, text
    assert max(len(line) for line in text.splitlines()) <= WIDTH


def _every_built_in():
    from gradcheck.scenario import catalog

    return [
        (info.name, fault)
        for info in catalog.all_infos()
        if info.source == "built-in"
        for fault in (None, *info.faults)
    ]


@pytest.mark.slow  # every built-in scenario and fault through the CLI: minutes
@pytest.mark.parametrize("scenario,fault", _every_built_in())
def test_every_built_in_default_view_fits_one_screen(scenario, fault):
    text = _default_view(scenario, fault)
    assert len(text.splitlines()) <= ONE_SCREEN, text


def test_a_params_bare_name_in_the_fix_prose_does_not_split_its_group():
    """Params named x, y, z with one NaN cause share one fix; the "x" inside "torch.sqrt(x)" is prose, not the
    subject, so it must not make x's fix look different from y's."""
    hint = "guard the operation (wp.sqrt(x) at 0, torch.sqrt(x)): add an eps"
    findings = [Finding("nonfinite", Severity.ERROR, f"{name}.grad", "NaN", hint) for name in ("x", "y", "z")]
    (group,) = group_findings(findings)
    assert len(group.members) == len(findings)
    own = [Finding("missing-gradient", Severity.ERROR, f"{n}.grad", "m", f"set {n}.requires_grad = True") for n in "ab"]
    assert len(group_findings(own)) == 1  # where the name is used as the subject, it still merges


NARROW = (70, 80)  # terminals narrower than the one-screen width (80: the common default)


@pytest.mark.parametrize("width", NARROW)
def test_a_narrow_terminal_folds_names_and_crops_no_verdict(width):
    """Rich crops a cell whose column cannot shrink: the verdict column was cut to `accumu` at 70 columns. Now
    the param names yield first (they fold, at 70) and every verdict stays whole; at 80 a name like
    `states[0].joint_qd.grad` stays whole too."""
    names = ["states[0].joint_qd.grad", "controls[0].joint_f.grad", "model.body_q.grad"]
    params = [_param(name, "accumulation, reentrancy") for name in names]
    lines = table.render(_report(SURVIVING[:2], params=params), color=False, width=width).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("param"))
    verdict_words = [w for line in lines[start + 1 :] for w in line.split() if w.startswith(("accum", "reentr"))]
    assert verdict_words[:2] == ["accumulation,", "reentrancy"] and len(verdict_words) == 2 * len(names), lines
    if width >= 80:
        assert all(any(name in line for line in lines) for name in names), lines
