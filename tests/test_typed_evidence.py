"""Typed evidence (gradcheck/model/evidence.py), on real check output only.

- docs/checks.md's "Evidence (JSON)" table is parsed, and every row's keys must be in the real JSON of a run of
  that check's fault: the docs and the output cannot drift, and a check renaming a key fails here;
- ``--ignore CHECK:MEMBER`` silences a family reported once by its worst member alike under ``run`` and ``exec``
  (the subjects a finding covers are its evidence's, not guessed from keys);
- the table groups and ranks real findings by what their evidence declares, ``--graph``'s marks come from the
  evidence of real findings, and real findings pickle (they cross a process boundary under ``--timeout``).

Each source (a scenario's fault, a program) runs once per module and is reused; Newton ones are slow.
"""

from __future__ import annotations

import json
import pickle
import re

import pytest
from conftest import ROOT, TESTS, audited

import gradcheck
from gradcheck.checks import BY_NAME
from gradcheck.formats.finding_groups import group_findings
from gradcheck.model.evidence import BlamedLaunch, ChainBreak, ChangedArrays, Evidence, Origin, Record
from gradcheck.model.findings import Severity
from gradcheck.model.suppressions import Suppressions, parse_rules

HERE = TESTS / "programs" / "typed_evidence"
FAMILY = str(HERE / "family.py")
EQUIVALENCE = str(TESTS / "programs" / "equivalence" / "as_scenario.py")
CLEARED = str(TESTS / "programs" / "cleared" / "as_scenario.py")
ROWS = str(TESTS / "programs" / "jacobian" / "rows_fault.py")
MEMBERS = [f"p.w[{i}].grad" for i in range(4)]


def _run(spec, fault=None, *, fd="off", replay=False, passes=3, max_norm=None, **settings):
    def ran():
        report = gradcheck.check(spec, passes=passes, fault=fault, fd=fd, replay=replay, settings=settings,
                                 max_norm=max_norm)  # fmt: skip
        assert report.scenarios[0].error is None, report.scenarios[0].error
        return report.scenarios[0]

    return ran


def _exec(path, *argv):
    return lambda: audited(path, *argv)


# each (check, kind) of the docs' table → the run whose findings show it
SOURCES = {
    ("accumulation", "measured"): _run(FAMILY, "no-zero"),
    ("accumulation", "carried"): _exec(FAMILY, "--no-zero"),
    ("accumulation", "rows"): _exec(ROWS),
    ("zero-audit", ""): _run(FAMILY, "no-zero"),
    ("missing-gradient", "param"): _run(EQUIVALENCE, "missing-gradient"),
    ("missing-gradient", "leaves"): _exec(str(HERE / "leaves.py")),
    ("stale-adjoint", ""): _run(EQUIVALENCE, "stale-struct"),
    ("dangling-adjoint", ""): _run("nested-struct", "aos-freed"),
    ("changed-before-backward", ""): _run(EQUIVALENCE, "changed-before-backward"),
    ("nonfinite", "gradient"): _run(EQUIVALENCE, "nan"),
    ("explosion", "norm"): _run(EQUIVALENCE, "explosion"),
    # chaos over a 5 s rollout (tests/test_norm_anomalies.py): norms grow along the controls' family
    ("explosion", "growth"): _run("double-pendulum", passes=1, max_norm=1e3, steps="3000"),
    ("vanishing", ""): _run("spring-chain", "unit-mismatch"),
    ("mutated-gradient", "rewritten"): _run(EQUIVALENCE, "mutated-gradient"),
    ("mutated-gradient", "cleared"): _run(CLEARED, "zero-before-update"),
    ("fd-mismatch", ""): _run("spring-chain", "wrong-func-grad", fd="fast"),
    ("write-after-read", ""): _run(EQUIVALENCE, "write-after-read"),
    ("adjoint-mismatch", ""): _run("spring-chain", "wrong-func-grad", fd="fast"),
    ("reentrancy", ""): _run("cartpole", replay=True),
    ("stateful-forward", ""): _run("spring-chain", "loss-not-cleared"),
}
SLOW = {("explosion", "growth"), ("reentrancy", "")}  # Newton: the slow lane
# rows no cheap fault shows, with why (their keys are still parsed, and must name a check that exists)
UNSHOWN = {
    ("nonfinite", "loss"): "a NaN loss with finite gradients needs a program built for it",
    ("internal-error", ""): "a gradcheck failure; test_internal_error_evidence_is_its_own_type builds it",
    ("torch-bridge", ""): "needs PyTorch (tests/test_torch_exec.py runs its programs)",
    ("cross-rank", ""): "needs torchrun with DDP (tests/test_torch_cross_rank.py runs its programs)",
}
_RESULTS: dict = {}


def _result(source):
    """One run per source per session (the same callable is reused by several rows)."""
    if source not in _RESULTS:
        _RESULTS[source] = source()
    return _RESULTS[source]


def documented() -> dict[tuple[str, str], tuple[list[str], list[str]]]:
    """(check, kind) → (keys every such finding has, keys only some have), read from docs/checks.md."""
    text = (ROOT / "docs" / "checks.md").read_text(encoding="utf-8")
    section = text.split("## Evidence (JSON)", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or cells[0] in ("check", "") or set(cells[0]) <= {"-"}:
            continue
        keys, sometimes = (re.findall(r"`([^`]+)`", cell) for cell in cells[2:])
        rows[(cells[0], cells[1])] = (keys, sometimes)
    return rows


def test_the_docs_table_names_every_check_and_every_row_is_shown_or_said_why_not():
    rows = documented()
    assert {check for check, _kind in rows} == set(BY_NAME)
    assert set(rows) == set(SOURCES) | set(UNSHOWN), set(rows) ^ (set(SOURCES) | set(UNSHOWN))
    assert all(keys for keys, _sometimes in rows.values())


@pytest.mark.parametrize(
    ("check", "kind"), [pytest.param(*row, marks=pytest.mark.slow) if row in SLOW else row for row in SOURCES]
)
def test_the_documented_keys_are_in_the_real_json(check, kind):
    source = SOURCES[(check, kind)]
    keys, sometimes = documented()[(check, kind)]
    result = _result(source)
    found = [json.loads(json.dumps(f.to_dict()))["evidence"] for f in result.findings if f.check == check]
    assert found, f"no {check} finding: {[(f.check, f.subject) for f in result.findings]}"
    assert any(set(keys) <= set(e) for e in found), [sorted(set(keys) - set(e)) for e in found]
    undocumented = {k for e in found for k in e} - set(keys) - set(sometimes) - {"verify_fp_first", "verify_fp_ops"}
    if len(found) == 1 or kind == "":
        assert not undocumented, f"{check}: keys not in docs/checks.md: {sorted(undocumented)}"


def test_internal_error_evidence_is_its_own_type():
    from gradcheck.checks import internal_error
    from gradcheck.model.trace import InternalError

    try:
        raise RuntimeError("boom")
    except RuntimeError as exc:
        finding = internal_error.finding(InternalError.of("check demo", exc))
    keys, _sometimes = documented()[("internal-error", "")]
    assert isinstance(finding.evidence, Record) and set(keys) == set(finding.to_dict()["evidence"])


# -- subjects: one family, one rule, both drivers ------------------------------------------------------------------
@pytest.mark.parametrize("source", [SOURCES[("accumulation", "measured")], SOURCES[("accumulation", "carried")]])
def test_ignoring_one_member_silences_the_family_under_run_and_exec_alike(source):
    (family,) = [f for f in _result(source).findings if f.check == "accumulation"]
    assert set(family.subjects) == set(MEMBERS) and family.covers == len(MEMBERS)
    for member in MEMBERS:  # whichever member the finding is named by
        rules = Suppressions(ignore=parse_rules([f"accumulation:{member}"], "--ignore", tuple(BY_NAME)))
        assert rules.reason(family) == f"--ignore accumulation:{member}"
    other = Suppressions(ignore=parse_rules(["accumulation:p.other.grad"], "--ignore", tuple(BY_NAME)))
    assert other.reason(family) is None


@pytest.mark.parametrize("source", [SOURCES[("accumulation", "measured")], SOURCES[("accumulation", "carried")]])
def test_the_verdict_column_flags_every_member_of_the_family(source):
    rows = {p.subject: p.verdict for p in _result(source).params}
    assert set(MEMBERS) <= set(rows) and all("accumulation" in rows[m] for m in MEMBERS), rows


# -- the table: groups and ranks by what the evidence declares ---------------------------------------------------
def test_a_group_of_real_findings_is_ranked_by_their_evidence():
    result = _result(_run(FAMILY, "no-zero", names="apart"))
    accumulated = [f for f in result.findings if f.check == "accumulation"]
    assert len(accumulated) == len(MEMBERS)  # apart: one finding per param, one cause
    (group,) = [g for g in group_findings(result.findings) if g.check == "accumulation"]
    ranks = [m.measure.value for m in group.members]
    assert ranks == sorted(ranks, reverse=True) and all(m.measure == m.finding.evidence.rank for m in group.members)
    expected = f"last/1 ×{accumulated[0].evidence['ratio_last_first']:.3g}"
    assert group.members[0].compact().endswith(f"({expected})")


def test_a_family_finding_says_how_many_it_covers_in_the_table():
    (group,) = [g for g in group_findings(_result(SOURCES[("zero-audit", "")]).findings) if g.check == "zero-audit"]
    assert group.members[0].label == f"p.w[*].grad ×{len(MEMBERS)}"


# -- --graph: the marks real evidence declares -----------------------------------------------------------------
def _marks(source, check):
    return [m for f in _result(source).findings if f.check == check for m in f.evidence.marks]


def test_a_chain_break_is_marked_where_the_check_found_it():
    (mark,) = _marks(_run("chains", "no-backward"), "missing-gradient")
    assert isinstance(mark, ChainBreak) and mark.cause == "no-backward" and mark.param == "offset"
    assert mark.launch.startswith("broadcast_forward_only (") and mark.index is not None


def test_changed_arrays_and_wrong_adjoints_are_marked():
    (changed,) = _marks(SOURCES[("changed-before-backward", "")], "changed-before-backward")
    assert isinstance(changed, ChangedArrays) and changed.arrays == ("p.target",) and changed.reader_indices
    blamed = _marks(SOURCES[("adjoint-mismatch", "")], "adjoint-mismatch")
    assert blamed and all(isinstance(m, BlamedLaunch) and m.kernel and m.index is not None for m in blamed)


def test_where_a_nan_starts_is_marked_when_it_was_found():
    result = _result(_run("spring-chain", "nan-backward"))
    (finding,) = [f for f in result.findings if f.check == "nonfinite"]
    origin = finding.evidence.get("origin")
    marks = finding.evidence.marks
    assert marks == ((Origin("NaN/Inf", origin["index"], origin["kernel"], origin["site"], origin["array"]),)
                     if origin else ())  # fmt: skip


# -- the type itself, on real findings ------------------------------------------------------------------------------
def test_real_findings_pickle_and_their_evidence_is_frozen_typed_and_reads_as_its_json():
    findings = [f for source in set(_RESULTS) for f in _result(source).findings] or list(
        _result(SOURCES[("accumulation", "measured")]).findings
    )
    for finding in findings:
        evidence = finding.evidence
        assert isinstance(evidence, Evidence) and isinstance(evidence, Record) and type(evidence) is not Record
        back = pickle.loads(pickle.dumps(finding))
        assert back.to_dict() == finding.to_dict() and type(back.evidence) is type(evidence)
        assert dict(evidence) == evidence.to_json() and evidence == evidence.to_json()
        with pytest.raises(AttributeError):
            evidence.count = 0  # frozen
        assert isinstance(finding.severity, Severity)


def test_a_driver_extends_evidence_with_keys_of_its_own():
    finding = next(f for f in _result(SOURCES[("nonfinite", "gradient")]).findings if f.check == "nonfinite")
    more = finding.evidence.extended(verify_fp_first="sqrt", verify_fp_ops=["sqrt"])
    assert (
        more["verify_fp_first"] == "sqrt"
        and more["nan"] == finding.evidence["nan"]
        and type(more) is type(finding.evidence)
    )
    assert "verify_fp_first" not in finding.evidence  # the original is untouched


def test_a_site_is_the_programs_line_under_exec_and_none_under_run():
    """Under ``run`` the engine calls ``tape.backward`` for a scenario without a backward hook: no program frame is
    on the stack, and the frames below the engine (the console script, a --timeout worker) are a launcher's, so the
    site is none — never ``.venv/bin/gradcheck:6`` or ``multiprocessing/process.py:108``."""
    (ran,) = [f for f in SOURCES[("zero-audit", "")]().findings if f.check == "zero-audit"]
    assert ran.evidence["site"] is None
    (carried,) = [f for f in SOURCES[("accumulation", "carried")]().findings if f.check == "zero-audit"][:1]
    assert carried.evidence["site"].startswith(str(FAMILY)), carried.evidence["site"]
