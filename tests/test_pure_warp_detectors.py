"""The detectors on small pure-Warp programs: each fault fires, each clean variant stays silent."""

from __future__ import annotations

import math
import re

import pytest
from conftest import SCENARIOS, by_check, needs_retain_grad, needs_subscript_annotations, run_scenario

from gradcheck.checks import accumulation
from gradcheck.model.exit_codes import ExitCode
from gradcheck.model.findings import Severity
from gradcheck.model.trace import ParamPass, ParamTrace

RETAIN = str(SCENARIOS / "retain_grad.py")
STRUCTS = str(SCENARIOS / "struct_array.py")


@needs_retain_grad
def test_retain_grad_clean_is_silent():
    result, _ = run_scenario(RETAIN, passes=5)
    assert result.error is None
    assert result.findings == ()


@needs_retain_grad
def test_retain_grad_without_zero_is_superlinear():
    result, _ = run_scenario(RETAIN, fault="no-zero", passes=5)
    (finding,) = by_check(result.findings, "accumulation")
    assert finding.subject == "x.grad"
    assert finding.evidence["shape"] == "superlinear"
    coefs = finding.evidence["coefficients"]
    # 1, 3, 6, 10, 15: each backward adds the retained y.grad, which itself grows k× on pass k
    assert [round(c, 4) for c in coefs] == [1.0, 3.0, 6.0, 10.0, 15.0]
    survivors = {s for f in by_check(result.findings, "zero-audit") for s in f.evidence["survivors"]}
    assert {"x.grad", "y.grad"} <= survivors
    assert "loss.grad" not in survivors  # re-seeded by fill_(1.0) on every backward


@needs_retain_grad
def test_retained_intermediate_with_params_zeroed_is_linear():
    result, _ = run_scenario(RETAIN, fault="params-only", passes=4)
    (finding,) = by_check(result.findings, "accumulation")
    assert finding.evidence["shape"] == "linear"
    assert finding.evidence["ratio_last_first"] == 4.0
    (survivor,) = by_check(result.findings, "zero-audit")
    assert survivor.subject == "y.grad"


def test_gradient_behind_array_of_structs_survives_tape_zero():
    result, _ = run_scenario(STRUCTS, fault="tape-zero-only", passes=3)
    (audit,) = by_check(result.findings, "zero-audit")
    assert audit.evidence["reached_via"] == "array of structs"
    assert sorted(audit.evidence["survivors"]) == [f"parts[{i}].weight.grad" for i in range(3)]
    assert audit.evidence["aliases"] == ["weights[2].grad"]
    assert audit.evidence["first_pass"] == 1
    (acc,) = by_check(result.findings, "accumulation")
    assert acc.evidence["shape"] == "linear"
    assert acc.evidence["affected_count"] == 3


def test_array_of_structs_zeroed_by_hand_is_silent():
    result, _ = run_scenario(STRUCTS, passes=3)
    assert result.error is None
    assert result.findings == ()


def _trace(norms, coefs, equal=None):
    passes = tuple(
        ParamPass(True, n, n, 1, 0, (equal or [True] + [False] * (len(norms) - 1))[i], abs(n - norms[0]), c)
        for i, (n, c) in enumerate(zip(norms, coefs))
    )
    return ParamTrace("p", "p.grad", (1,), "float32", passes)


def test_classify_collapse_and_drift():
    assert accumulation.classify(_trace([2.0, 0.0, 0.0], [1.0, 0.0, 0.0])) == "collapse"
    assert accumulation.classify(_trace([1.0, 1.5, 0.7], [1.0, 1.5, 0.7])) == "drift"
    assert accumulation.classify(_trace([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])) == "linear"
    assert accumulation.classify(_trace([1.0, 3.0, 6.0], [1.0, 3.0, 6.0])) == "superlinear"
    assert accumulation.classify(_trace([1.0, math.nan, 1.0], [1.0, math.nan, 1.0])) == "drift"


@needs_retain_grad
def test_unreachable_intermediate_is_named_by_its_kernel_argument():
    path = str(SCENARIOS / "local_intermediate.py")
    result, _ = run_scenario(path, fault="no-zero", passes=2)
    survivors = {s for f in by_check(result.findings, "zero-audit") for s in f.evidence["survivors"]}
    assert "square.y.grad" in survivors, survivors
    assert "x.grad" in survivors
    clean, _ = run_scenario(path, passes=2)
    assert clean.findings == ()


def test_cuda_tolerance_follows_warp_deterministic_mode(monkeypatch):
    import warp as wp

    from gradcheck.measure.gradients import CUDA_RTOL, equality_tolerance

    assert equality_tolerance("cpu") == 0.0
    assert equality_tolerance("cuda:0") == CUDA_RTOL  # default: NOT_GUARANTEED, float atomics reorder
    if hasattr(wp, "DeterministicMode"):
        monkeypatch.setattr(wp.config, "deterministic", wp.DeterministicMode.RUN_TO_RUN)
        assert equality_tolerance("cuda:0") == 0.0


def test_gradient_reader_compares_per_param_when_the_param_set_changes():
    import warp as wp

    from gradcheck.measure.gradients import GradientReader

    def read(reader, params):  # one pass: measure after backward, commit at its end, then the records
        stats = reader.measure(params)
        reader.commit()
        return {k: reader.record(k, st) for k, st in stats.items()}

    a = wp.array([1.0, 2.0], dtype=float, device="cpu", requires_grad=True)
    b = wp.array([3.0], dtype=float, device="cpu", requires_grad=True)
    a.grad.fill_(1.0)
    b.grad.fill_(2.0)
    reader = GradientReader(tolerance=0.0)
    first = read(reader, {"a": a, "b": b})
    assert first["a"].norm == 2**0.5 and first["b"].coef == 1.0 and first["b"].equal_to_first
    a.requires_grad = False  # a loses its buffer: b must still compare bitwise-equal with pass 1
    second = read(reader, {"a": a, "b": b})
    assert not second["a"].has_grad
    assert second["b"].equal_to_first and second["b"].coef == 1.0
    b.grad.fill_(4.0)
    third = read(reader, {"a": a, "b": b})
    assert not third["b"].equal_to_first and third["b"].coef == 2.0 and third["b"].diff_norm == 2.0


@needs_subscript_annotations
def test_nested_struct_field_gradients_are_audited_and_named():
    path = str(SCENARIOS / "struct_fields.py")
    clean, _ = run_scenario(path, passes=3)
    assert clean.error is None and clean.findings == ()
    assert all(p.norms[0] > 0 for p in clean.params)

    result, _ = run_scenario(path, fault="no-zero", passes=3)
    audits = by_check(result.findings, "zero-audit")
    survivors = {s for f in audits for s in f.evidence["survivors"]}
    assert {"scale.grad", "thickness.grad", "weights.grad"} <= survivors, survivors
    via = {s: f.evidence["reached_via"] for f in audits for s in f.evidence["survivors"]}
    assert via["scale.grad"] == via["thickness.grad"] == "nested struct field"  # model.geo.*
    assert via["weights.grad"] == "struct field"  # model.weights
    assert {f.evidence["shape"] for f in by_check(result.findings, "accumulation")} == {"linear"}


@needs_subscript_annotations
def test_subscript_annotated_struct_fields_are_audited():
    """``thickness: wp.array[float]``: on Warp 1.19 the annotation test moved under warp._src, and a lookup in
    warp.types alone treated the field as a non-array, so a late requires_grad on it went unseen."""
    result, report = run_scenario(str(SCENARIOS / "struct_fields.py"), fault="late-requires-grad", passes=2)
    (stale,) = by_check(result.findings, "stale-adjoint")
    assert stale.subject == "model.geo.thickness.grad" and stale.evidence["kind"] == "null-grad"
    assert stale.severity == Severity.ERROR and report.exit_code == ExitCode.FINDINGS


def test_names_come_from_the_program_never_from_gradchecks_own_tape():
    """Objects from warp.* packages (Warp's example programs) are walked for names; a scenario that keeps the
    tape it is given does not get subjects named after gradcheck's probe tape."""
    result, _ = run_scenario(str(SCENARIOS / "keeps_tape.py"), passes=2)
    assert [p.subject for p in result.params] == ["sim.x.grad"]
    (war,) = by_check(result.findings, "write-after-read")
    assert war.subject == "square.scratch"  # a local of forward(): its kernel argument, not "_tape.arrays[...]"
    # no subject walked through the probe tape (`_tape.arrays[...]`); the scenario's file name, keeps_tape.py, is fine
    assert not any(re.search(r"\b_tape[.\[]", f.subject + " " + f.message) for f in result.findings)


def test_missing_gradient_names_kernels_built_without_backward():
    result, _ = run_scenario(str(SCENARIOS / "no_backward.py"), passes=2)
    (missing,) = by_check(result.findings, "missing-gradient")
    assert missing.subject == "x.grad"
    assert "squared_sum (no_backward.py:" in missing.message and "enable_backward=False" in missing.message
    assert missing.evidence["break"]["cause"] == "no-backward"
    assert "enable_backward=True" in missing.hint and "Newton" not in missing.hint  # a pure-Warp program


def test_an_input_changed_before_backward_is_named_with_the_launch_that_read_it():
    result, report = run_scenario("spring-chain", fault="changed-before-backward", passes=2)
    (changed,) = by_check(result.findings, "changed-before-backward")
    assert changed.severity == Severity.ERROR and report.exit_code == ExitCode.FINDINGS
    assert changed.subject == "x"
    (reader,) = changed.evidence["readers"]
    assert reader.startswith("launch #0 chain_energy (spring_chain.py:")  # the launch, the file and the line
    # and the gradient mismatch it causes says so instead of blaming an adjoint
    (fd,) = by_check(result.findings, "fd-mismatch")
    assert "arrays changed before backward: x" in fd.message


def test_backward_hooks_that_change_nothing_are_not_changed_before_backward():
    """Clean twins with their own backward(tape, loss), where the watch runs: nothing changed, nothing said."""
    for spec in ("rollout", str(SCENARIOS / "keeps_tape.py")):
        result, _ = run_scenario(spec, passes=2)
        assert result.error is None and not by_check(result.findings, "changed-before-backward"), spec
    clean, _ = run_scenario("spring-chain", passes=2)
    assert not by_check(clean.findings, "changed-before-backward")


@pytest.mark.parametrize(
    ("fault", "kernel"),
    [
        ("wrong-func-grad", "chain_energy_custom"),  # a hand-written @wp.func_grad missing a factor 2
        ("runtime-loop", "chain_energy_substeps"),  # Warp 1.19's dynamic-loop adjoint (NVIDIA/warp#729 family)
    ],
)
def test_a_wrong_adjoint_is_named_by_launch_kernel_and_line(fault, kernel):
    result, report = run_scenario("spring-chain", fault=fault, passes=2)
    (wrong,) = by_check(result.findings, "adjoint-mismatch")
    assert wrong.severity == Severity.ERROR and report.exit_code == ExitCode.FINDINGS
    assert wrong.subject.startswith(f"launch #0 {kernel} (spring_chain.py:")
    (launch,) = wrong.evidence["launches"]
    assert launch["status"] == "mismatch" and abs(launch["adjoint"] - launch["fd"]) > 0.1 * abs(launch["fd"])
    assert wrong.evidence["why"] == "fd-mismatch fired"  # run by itself, because the gradient disagreed
    (fd,) = by_check(result.findings, "fd-mismatch")
    assert f"launch #0 {kernel}" in fd.message and "has a wrong adjoint" in fd.message


def test_a_recorded_backward_that_assigns_is_named_by_its_record_site():
    """A custom op (launched with record_tape=False, its backward recorded with tape.record_func) whose adjoint
    kernel writes x_grad[i] = ... where it must add: live on every Warp. No forward to replay, so the entry is
    judged by how it treats the gradients it is given."""
    result, report = run_scenario("spring-chain", fault="record-func-assigns", passes=2)
    (wrong,) = by_check(result.findings, "adjoint-mismatch")
    assert wrong.severity == Severity.ERROR and report.exit_code == ExitCode.FINDINGS
    assert wrong.subject.startswith("tape entry #0 record_func SpringChain._double_points.<lambda> (spring_chain.py:")
    assert "overwrites the gradient of x.grad instead of adding to it (100% of the elements" in wrong.message
    assert "add to the gradients it is given" in wrong.hint and "spring_chain.py:" in wrong.hint
    (fd,) = by_check(result.findings, "fd-mismatch")
    assert "tape entry #0 record_func" in fd.message


def test_a_recorded_backward_that_adds_is_ok(tmp_path):
    """The clean twin: the same custom op with x_grad[i] += ...; tested (the blame table lists it), silent."""
    from gradcheck.engine.pipeline import run
    from gradcheck.model.options import BlameMode, RunOptions

    twin = tmp_path / "adding_op.py"
    twin.write_text(
        "from gradcheck.scenarios.spring_chain import SpringChain, adj_double_points\n\n"
        "class AddingOp(SpringChain):\n"
        "    name = 'adding-op'\n"
        "    def setup(self, device, fault=None):\n"
        "        super().setup(device, 'record-func-assigns')\n"
        "        self.twin_adjoint = adj_double_points  # += : right\n\n"
        "scenario = AddingOp\n"
    )
    result, _ = run_scenario(str(twin), passes=2)
    assert result.error is None and result.findings == (), [(f.check, f.message) for f in result.findings]
    (checked,) = run([str(twin)], RunOptions(device="cpu", passes=1, blame=BlameMode.always)).scenarios
    rows = {row.kernel: row.statuses for row in checked.blame.kernels}
    assert rows["record_func SpringChain._double_points.<lambda>"] == {"ok": 1}


def test_record_func_entries_read_or_reset_are_not_called_overwrites():
    """What the prefill test must not flag: a backward that reads an output's gradient and clears it, and one
    that zeroes the gradient of an array its forward reset to a constant."""
    import numpy as np
    import warp as wp

    from gradcheck.rerun.launch_check import check_recorded_functions

    x = wp.array(np.arange(4, dtype=np.float32), requires_grad=True)
    y = wp.zeros(4, dtype=float, requires_grad=True)
    tape = wp.Tape()

    def consume():  # x.grad += 3 y.grad, then y.grad is spent
        x.grad.assign(x.grad.numpy() + 3.0 * y.grad.numpy())
        y.grad.zero_()

    def reset():  # the forward wrote a constant into y: nothing flows back through it
        y.grad.zero_()

    def overwrite():  # the bug: x.grad = 3 y.grad
        x.grad.assign(3.0 * y.grad.numpy())

    for backward in (consume, reset, overwrite):
        tape.record_func(backward, [x, y])
    functions = {0: ([x, y], "train.py:10"), 1: ([x, y], "train.py:11"), 2: ([x, y], "train.py:12")}
    before = x.grad.numpy().copy()
    verdicts = check_recorded_functions(tape, functions, names={id(x): "x"})
    assert [v.status for v in verdicts] == ["ok", "ok", "assigns"]
    assert verdicts[2].where == "train.py:12" and "gradient of x.grad" in verdicts[2].note
    assert np.array_equal(x.grad.numpy(), before)  # the program's gradients put back


def test_constructs_an_old_warp_mishandles_are_found_in_the_kernel_source():
    """kernel_patterns reads the source and options: the same verdict on every Warp (the finding cites it only on
    the releases that have the bug)."""
    from gradcheck.model import known_bugs
    from gradcheck.scenarios import spring_chain
    from gradcheck.source.kernel_patterns import suspects

    if known_bugs.version_tuple(wp_version()) >= (1, 8, 0):  # conditional expressions compile from 1.8 on
        from gradcheck.scenarios._ternary import chain_energy_weighted

        (ternary,) = suspects(chain_energy_weighted)
        assert ternary.bug == "TERNARY_SAME_ELEMENT" and ternary.where.endswith("_ternary.py:33")
        assert ternary.what == "both branches of a conditional expression read x[k]"
    (opt_in,) = suspects(spring_chain.chain_energy_opted_in)
    assert opt_in.bug == "FUNC_ADJOINTS_FOLLOW_MODULE" and "_forward_only.py:" in opt_in.where
    assert suspects(spring_chain.chain_energy) == ()
    for bug in ("TERNARY_SAME_ELEMENT", "FUNC_ADJOINTS_FOLLOW_MODULE"):
        assert isinstance(getattr(known_bugs, bug), known_bugs.KnownBug)


@pytest.mark.parametrize(
    ("fault", "bug", "kernel", "line"),
    [
        ("ternary-same-element", "TERNARY_SAME_ELEMENT", "chain_energy_weighted", "_ternary.py:33"),
        ("backward-opt-in", "FUNC_ADJOINTS_FOLLOW_MODULE", "chain_energy_opted_in", "_forward_only.py:"),
    ],
)
def test_kernels_an_old_warp_differentiates_wrongly_are_named_with_the_release_that_fixed_it(fault, bug, kernel, line):
    """Right on the latest Warp: silent. make test-compat runs this on the releases that have the bug (1.16.0
    for the ternary, up to 1.17.0 for the opt-in), where the kernel, the line and the fix are named."""
    from gradcheck.model import known_bugs

    known = getattr(known_bugs, bug)
    if fault == "ternary-same-element" and known_bugs.version_tuple(wp_version()) < (1, 8, 0):
        pytest.skip("Warp before 1.8 cannot compile conditional expressions in kernels")
    result, _ = run_scenario("spring-chain", fault=fault, passes=2)
    assert result.error is None
    if known.affects(wp_version()):
        (wrong,) = by_check(result.findings, "adjoint-mismatch")
        assert wrong.severity == Severity.ERROR and wrong.subject.startswith(f"launch #0 {kernel} (spring_chain.py:")
        assert line in wrong.message and f"fixed in {known.fixed_in}" in wrong.message
        assert by_check(result.findings, "fd-mismatch")
    else:
        assert result.findings == (), [(f.check, f.message) for f in result.findings]


def wp_version() -> str:
    import warp as wp

    return wp.__version__


def test_correct_kernels_pass_the_per_launch_test():
    """The clean chain, tested launch by launch on request: every launch agrees, nothing is reported."""
    from gradcheck.engine.pipeline import run
    from gradcheck.model.options import BlameMode, RunOptions

    report = run(["spring-chain"], RunOptions(device="cpu", passes=2, blame=BlameMode.always))
    (result,) = report.scenarios
    assert result.error is None and not by_check(result.findings, "adjoint-mismatch")
    (row,) = result.blame.kernels  # it ran: one kernel, its launch tested and right
    assert row.kernel == "chain_energy" and row.statuses == {"ok": 1} and result.blame.why == "--blame always"


def test_blame_command_gives_one_row_per_kernel_and_the_exit_code():
    from conftest import cli_json

    proc, data = cli_json("blame", "spring-chain", "--fault", "wrong-func-grad", "--device", "cpu")
    assert proc.returncode == ExitCode.FINDINGS
    (scenario,) = data["scenarios"]
    assert scenario["passes"] == 1 and scenario["blame"]["why"] == "--blame always"
    (row,) = scenario["blame"]["kernels"]
    assert row["kernel"] == "chain_energy_custom" and row["statuses"] == {"mismatch": 1}
    assert "spring_chain.py:" in row["where"]


def test_a_tape_recorded_copy_whose_adjoint_assigns_is_named_as_a_tape_entry():
    """wp.clone inside the tape, its source also read directly: right on Warp >= 1.17; before, the copy's recorded
    adjoint overwrote the source's gradient (make test-compat runs this on 1.5.1 - 1.9.1)."""
    import warp as wp

    from gradcheck.engine.pipeline import run
    from gradcheck.model.known_bugs import COPY_ADJOINT_ASSIGNS
    from gradcheck.model.options import BlameMode, RunOptions

    result, _ = run_scenario("spring-chain", fault="clone-on-tape", passes=2)
    if COPY_ADJOINT_ASSIGNS.affects(wp.__version__):
        (blamed,) = by_check(result.findings, "adjoint-mismatch")
        assert blamed.severity == Severity.ERROR and blamed.subject == "tape entry #0 wp.copy (recorded on the tape)"
        assert "instead of adding" in blamed.message and "fixed in 1.17.0" in blamed.message
        (fd,) = by_check(result.findings, "fd-mismatch")
        assert "tape entry #0 wp.copy" in fd.message
    else:
        assert result.findings == (), [(f.check, f.message) for f in result.findings]
        options = RunOptions(device="cpu", passes=1, fault="clone-on-tape", blame=BlameMode.always)
        (checked,) = run(["spring-chain"], options).scenarios
        rows = {row.kernel: row.statuses for row in checked.blame.kernels}
        assert rows["wp.copy (recorded on the tape)"] == {"ok": 1}  # tested, and it adds


def test_accumulation_on_cuda_tolerates_reordered_float_sums_but_not_a_second_backward():
    """CUDA's float atomics add a gradient's contributions in a different order every run. Exercised on CPU: each
    "pass" sums the same 64 contributions per element in float32 in a random order (what atomics do), or adds a
    second backward's worth on top. With the CUDA tolerance the reordered passes equal pass 1 and accumulation is
    silent; the doubled pass is caught as linear accumulation. Bitwise (CPU) tolerance would call the reordered
    passes different: the tolerance is what makes the check usable on CUDA."""
    import numpy as np
    import warp as wp

    from gradcheck.checks import accumulation
    from gradcheck.measure.gradients import CUDA_RTOL, GradientReader
    from gradcheck.model.trace import ParamTrace, PassRecord, Trace

    rng = np.random.default_rng(7)
    contributions = rng.standard_normal((64, 4096)).astype(np.float32)

    def reordered_sum(times: int = 1):
        total = np.zeros(4096, np.float32)
        for _ in range(times):
            for row in rng.permutation(64):  # one atomic add after another, in the order threads happen to run
                total += contributions[row]
        return total

    def trace_of(passes, tolerance):
        reader = GradientReader(tolerance)
        x = wp.zeros(4096, dtype=float, device="cpu", requires_grad=True)
        records = []
        for values in passes:
            x.grad.assign(values)
            stats = reader.measure({"x": x})
            reader.commit()
            records.append(reader.record("x", stats["x"]))
        param = ParamTrace("x", "x.grad", (4096,), "float32", tuple(records))
        loops = tuple(PassRecord(i + 1, 1.0, 1, 0, ()) for i in range(len(passes)))
        return Trace("reordered", None, "cuda:0", {}, (param,), loops, tolerance=tolerance), records

    reordered = [reordered_sum() for _ in range(4)]
    assert any(not np.array_equal(reordered[0], r) for r in reordered[1:])  # the orders really differ in float32
    trace, records = trace_of(reordered, CUDA_RTOL)
    assert all(r.equal_to_first for r in records) and accumulation.check(trace) == ()
    _, bitwise = trace_of(reordered, 0.0)
    assert not all(r.equal_to_first for r in bitwise[1:])  # bitwise equality would misjudge CUDA

    accumulated = [reordered_sum(k) for k in (1, 2, 3)]  # no zero between backwards, in reordered sums too
    trace, records = trace_of(accumulated, CUDA_RTOL)
    (finding,) = accumulation.check(trace)
    assert finding.subject == "x.grad" and [round(r.coef, 3) for r in records] == [1.0, 2.0, 3.0]


def test_argument_access_reads_loads_not_accumulations_or_metadata():
    """write-after-read needs the reader to load the values: a kernel that only accumulates into an array, stores
    into it, or reads its dtype/shape does not (Warp's own array_cast kernel does `dest[i] = dest.dtype(src[i])`)."""
    from access_kernels import accumulate_cast_and_load

    from gradcheck.warp_compat import argument_access

    access = argument_access(accumulate_cast_and_load)
    assert access.known
    assert access.reads == {"x", "through"}  # x loaded; `through` loaded inside the @wp.func it is passed to
    assert access.writes >= {"loss", "total", "dest", "out"}
    assert not access.reads_value("loss") and not access.reads_value("dest") and not access.reads_value("total")
