"""One engine: the same mistake, written once as a scenario and once as a plain training script, gets the same
findings from ``gradcheck run``, ``gradcheck exec`` and ``gradcheck.audit()``: the whole finding (check, severity,
subject, message, hint, evidence) and the notes, not only (check, severity, subject).

Two corpora, each a model module, as_scenario.py (a scenario, the mistake a fault) and as_script.py (a training
loop, the mistake a --mistake): tests/programs/equivalence (float arrays: every mistake the observer sees) and
tests/programs/equivalence_aos (a param that is an array of structs, never zeroed: exec audits its float fields'
gradient as run does). What only ``run`` can do because it runs the forward again (fd-mismatch, stateful-forward,
reentrancy, adjoint-mismatch) is left out: that is the one documented difference (README, "run and exec"). Where
a finding's fields differ legitimately by driver, ``driver_neutral`` says which and why; anything else must match.
"""

from __future__ import annotations

import json
import re
import runpy
import sys

import pytest
from conftest import TESTS, audited, cli

from gradcheck.model.exit_codes import ExitCode

PROGRAMS = TESTS / "programs"
CORPUS = PROGRAMS / "equivalence"
SCENARIO, SCRIPT = str(CORPUS / "as_scenario.py"), str(CORPUS / "as_script.py")
RUN_ONLY = {"fd-mismatch", "stateful-forward", "reentrancy", "adjoint-mismatch"}
ITERATIONS = 3  # run's passes and the script's iterations: one count under both

# each mistake's own finding: what the corpus exists to show (the full findings must also agree)
EXPECTED = {
    ("equivalence", "clean"): None,
    ("equivalence", "accumulation"): ("accumulation", "error", "p.x.grad"),
    ("equivalence", "incomplete-zeroing"): ("accumulation", "error", "p.x.grad"),  # carried in through p.total
    ("equivalence", "stale-struct"): ("stale-adjoint", "error", "p.inputs.x.grad"),
    ("equivalence", "nan"): ("nonfinite", "error", "p.x.grad"),
    ("equivalence", "explosion"): ("explosion", "error", "p.x.grad"),
    ("equivalence", "mutated-gradient"): ("mutated-gradient", "error", "p.x.grad"),
    ("equivalence", "missing-gradient"): ("missing-gradient", "error", "p.x.grad"),
    ("equivalence", "write-after-read"): ("write-after-read", "warning", "p.scratch"),
    ("equivalence", "changed-before-backward"): ("changed-before-backward", "error", "p.target"),
    # under run the default backward follows forward() at once: only a fingerprint taken at launch time sees it
    ("equivalence", "changed-inside-forward"): ("changed-before-backward", "error", "p.target"),
    ("equivalence_aos", "clean"): None,
    # the float fields of an array of structs' gradient, never zeroed: an error under every driver
    ("equivalence_aos", "accumulation"): ("accumulation", "error", "p.ps.grad"),
}


def _run(corpus: str, mistake: str):
    import gradcheck

    scenario = str(PROGRAMS / corpus / "as_scenario.py")
    fault = None if mistake == "clean" else mistake
    report = gradcheck.check(scenario, passes=ITERATIONS, fault=fault, fd="off", replay=False)
    (result,) = report.scenarios
    assert result.error is None, result.error
    return result


def _exec(corpus: str, mistake: str):
    # --keep-going: a dangling pointer skips that backward, as the runner does, instead of stopping the program
    script = PROGRAMS / corpus / "as_script.py"
    result = audited(script, "--mistake", mistake, "--iterations", str(ITERATIONS), keep_going=True)
    assert result.passes == ITERATIONS
    return result


def _audit(corpus: str, mistake: str):
    """The script run in this process inside ``gradcheck.audit()``, as a notebook or a test suite would."""
    import gradcheck

    folder = PROGRAMS / corpus
    argv, path = sys.argv, list(sys.path)
    sys.argv = [str(folder / "as_script.py"), "--mistake", mistake, "--iterations", str(ITERATIONS)]
    sys.path.insert(0, str(folder))
    try:
        with gradcheck.audit(keep_going=True) as audit:
            runpy.run_path(str(folder / "as_script.py"), run_name="__main__")
    finally:
        sys.argv, sys.path[:] = argv, path
    return audit.result


# Fields a finding may show differently by driver, each for a reason of the driver's, never of a check's:
_DRIVER_FIELDS = {
    # run's backward is gradcheck's own call (no site of the program's); exec's is the script's line
    "site": "<site>",
    # run's params are declared (params()), exec's are seen updated from their gradient: the role says which
    "role": "<role>",
    # run names its params by the scenario's params() keys ("x"); exec by what the program holds ("p.x")
    "params": "<param names>",
    # run reads the gradient at its own readout after after_backward(); exec at the program's own read
    "reader": "<reader>",
    # the runner always calls a zero step (scenario.zero(tape), which the mistake leaves empty); a script may call none
    "zero_step": "<zero step>",
    # addresses in this process's memory: no two runs share them
    "mirror_ptr": "<address>",
    "live_ptr": "<address>",
}
# per-iteration values: run restores the params before every pass, the script's SGD step moves them, so only the
# first iteration runs at the same params under both drivers and only its value must agree
_PER_ITERATION = ("norms", "norms_after_zero", "orphan_norms_after_zero", "readout_norms", "backward_norms", "losses")
# which iterations a check saw it on, where a driver sees fewer: only the first must agree
_FIRST_ITERATION_ONLY = {
    # a script that never zeroes is zero-audited when its next backward starts, and its last backward has none;
    # the runner calls its zero step after every pass, the last included
    "zero-audit",
    # the runner watches what forward() changes after a launch read it on its first pass only (its
    # ObserverConfig: a scenario's passes repeat one forward); exec watches every backward of the program
    "changed-before-backward",
}
# what only one driver could measure or see, per check: (evidence keys compared, why the rest differs)
_DRIVER_EVIDENCE = {
    # run's fixed params let it measure pass k against pass 1 (norms, shape, coefficients): evidence exec cannot
    # take; what both see is the leftover carried into the next backward (carriers) and whom it affects
    "accumulation": ("affected", "carriers", "stateful_forward"),
}


def driver_neutral(finding: dict) -> dict:
    """A finding's dict (``Finding.to_dict``) with only what legitimately differs by driver put in neutral form:
    the fields of ``_DRIVER_FIELDS`` (and where the message quotes them), per-iteration values after the first, the
    unit a report counts in ("pass" under run, "backward" under exec), run's own evidence of a check
    (``_DRIVER_EVIDENCE``), and the chain-break diagnosis of missing-gradient: run's observer watches the passes, not
    setup(), so a launch the scenario made in setup() is never seen (exec sees the script's every launch)."""
    found = dict(finding)
    found.pop("explain", None)
    evidence = dict(found["evidence"])
    message, hint = found["message"], found["hint"]
    for key, neutral in _DRIVER_FIELDS.items():
        value = evidence.get(key)
        if key in evidence:
            evidence[key] = neutral
        if isinstance(value, str) and value:
            message = message.replace(f" ({value})", "").replace(value, neutral)
    for key in _PER_ITERATION + (("iterations", "count") if found["check"] in _FIRST_ITERATION_ONLY else ()):
        if isinstance(evidence.get(key), list):
            evidence[key] = evidence[key][:1]
        elif key == "count":
            evidence[key], message = "<count>", re.sub(r"\(\d+ of (\d+) ", r"(<count> of \1 ", message)
    if found["check"] in _DRIVER_EVIDENCE:
        kept = _DRIVER_EVIDENCE[found["check"]]
        evidence = {k: v for k, v in evidence.items() if k in kept}
        message = hint = f"<{found['check']}: the driver's own wording of its evidence>"
    if found["check"] == "missing-gradient" and isinstance(evidence.get("break"), dict):
        evidence["break"] = {"array": evidence["break"].get("array")}
        message, hint = message.split("; the chain to the loss breaks")[0], "<the fix at the chain's break>"
    found.update(evidence=evidence, message=_neutral_units(_unquoted_numbers(message)), hint=hint)
    return found


# run counts passes, exec backwards (Trace.unit): run's phrasing of a pass, as exec says it of a backward
_UNIT_PHRASES = (
    (r"\bbackward on pass (\d+)", r"backward #\1"),  # "before backward on pass 1" (run), "before backward #1" (exec)
    (r"\b(on|from|by) pass (\d+)", r"\1 backward \2"),
    (r"\bevery pass\b", "every backward"),
    (r"(\b\d+|<count>) of (\d+) passes\b", r"\1 of \2 backwards"),
    # exec names the backward a norm was seen on; run's passes, at one set of params, all give that norm
    (r"(norm <n>) on backward \d+", r"\1"),
)


def _neutral_units(message: str) -> str:
    for pattern, replacement in _UNIT_PHRASES:
        message = re.sub(pattern, replacement, message)
    return message


def _unquoted_numbers(message: str) -> str:
    """Norms a message quotes after the first iteration (the worst, the last) are of moved params under exec;
    the evidence holds the first iteration's exactly, so the message's numbers need not match."""
    return re.sub(r"\bnorm [-+0-9.e]+", "norm <n>", message)


def _reuse_neutral(finding: dict) -> dict:
    """A freed address is handed to whatever the allocator allocates next, which differs by driver (run keeps saved
    copies of the params) and by when the garbage collector frees: a dangling pointer's address, its new owner, and
    whether it has one yet (``reused`` or only ``freed``, with the confidence that says which) are not the
    program's; the rest is."""
    if finding["check"] != "dangling-adjoint":
        return finding
    evidence = dict(finding["evidence"], pointer="<ptr>", owner="<owner>")
    if evidence.get("kind") in ("freed", "reused"):
        evidence.update(kind="<freed, maybe reused>", confidence="<freed or reused>")
    return dict(finding, evidence=evidence, message="<the freed address and its new owner>")


def _whole(result) -> tuple[list[dict], list[str]]:
    findings = [_reuse_neutral(driver_neutral(f.to_dict())) for f in result.findings if f.check not in RUN_ONLY]
    return sorted(findings, key=lambda f: (f["check"], f["subject"], f["severity"])), [
        _neutral_note(n) for n in result.notes
    ]


def _neutral_note(note: str) -> str:
    """The skipped-backward note in one wording: run counts passes ("backward not launched on pass(es) 1, 2, 3: …"),
    exec backwards ("backwards #1–#3 were not launched: …"); a dangling pointer skips the same iterations under both
    (it shows on Warp before 1.7.2, where the replaced struct gradient is freed)."""
    ran = re.match(r"backward not launched on pass\(es\) ([\d, ]+): (.*)", note)
    if ran:
        numbers = [int(n) for n in ran.group(1).replace(" ", "").split(",") if n]
        return f"skipped {numbers[0]}-{numbers[-1]}: {ran.group(2)}"
    executed = re.match(r"backwards? #(\d+)(?:–#(\d+))? (?:was|were) not launched: (.*)", note)
    if executed:
        return f"skipped {executed.group(1)}-{executed.group(2) or executed.group(1)}: {executed.group(3)}"
    return note


def _triples(result) -> set[tuple[str, str, str]]:
    return {(f.check, f.severity.label, f.subject) for f in result.findings if f.check not in RUN_ONLY}


@pytest.mark.parametrize(("corpus", "mistake"), list(EXPECTED), ids=[f"{c}-{m}" for c, m in EXPECTED])
def test_run_exec_and_audit_judge_the_same_mistake_alike(corpus, mistake):
    ran, executed, audited_ = _run(corpus, mistake), _exec(corpus, mistake), _audit(corpus, mistake)
    assert _triples(ran) == _triples(executed) == _triples(audited_), (
        f"run: {sorted(_triples(ran))}\nexec: {sorted(_triples(executed))}\naudit: {sorted(_triples(audited_))}"
    )
    assert _whole(ran) == _whole(executed), _differences(_whole(ran), _whole(executed))
    # one driver, one engine: exec and audit() of the same script give the very same findings and notes
    assert _whole(executed) == _whole(audited_), _differences(_whole(executed), _whole(audited_))
    expected = EXPECTED[(corpus, mistake)]
    if mistake == "stale-struct" and _old_struct_grads():  # before 1.7.2 the replaced gradient is freed (warp#720)
        expected = ("dangling-adjoint", "error", "p.inputs.x.grad")
    if expected is None:
        assert _triples(ran) == set()  # the clean twin stays silent under every driver
    else:
        assert expected in _triples(ran)


def _differences(one: tuple[list[dict], list[str]], other: tuple[list[dict], list[str]]) -> str:
    """The fields that differ, finding by finding: what the failure message shows."""
    lines = [f"notes: {one[1]} != {other[1]}"] if one[1] != other[1] else []
    for a, b in zip(one[0], other[0]):
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                lines.append(f"{a['check']} {a['subject']} {key}:\n  {a.get(key)!r}\n  {b.get(key)!r}")
    if len(one[0]) != len(other[0]):
        lines.append(f"{len(one[0])} findings != {len(other[0])}")
    return "\n".join(lines)


def _old_struct_grads() -> bool:
    import warp as wp

    from gradcheck.model.known_bugs import STRUCT_GRAD_FREED

    return STRUCT_GRAD_FREED.affects(wp.__version__)


def test_the_cli_agrees_too():
    """The same through the two commands, JSON on stdout (the script's own print comes first under exec)."""
    run = cli("run", SCENARIO, "--fault", "mutated-gradient", "--passes", "2", "--fd", "off", "--no-replay",
              "--format", "json", "--device", "cpu")  # fmt: skip
    executed = cli("exec", "--format", "json", SCRIPT, "--mistake", "mutated-gradient", "--iterations", "2")
    assert run.returncode == executed.returncode == ExitCode.FINDINGS, run.stderr[-2000:] + executed.stderr[-2000:]
    ran = json.loads(run.stdout)["scenarios"][0]
    audited = json.loads(executed.stdout[executed.stdout.index("{\n") :])["scenarios"][0]
    assert [driver_neutral(f) for f in ran["findings"]] == [driver_neutral(f) for f in audited["findings"]]
    assert audited["params"][0]["role"] == "updated" and ran["params"][0]["role"] == "declared"
