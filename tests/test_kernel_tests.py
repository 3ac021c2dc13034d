"""exec's default adjoint test (gradcheck.observe.kernel_tests): every kernel's first launch tested, by default.

The acceptance constructs (Warp's wrong-adjoint bugs, fault and clean twins) are tests/test_adjoint_constructs.py;
the third-party corpus tests/test_autodiff_corpus.py. Here: what the test reaches (copies on the tape, views,
several seeds, captured forwards), when a hand-written adjoint is an error and when no verdict, when a kernel is
tested again, that Featherstone's split adjoint is never an error, and the switch that turns it off.
"""

from __future__ import annotations

import pytest
from conftest import TESTS, cli_in_process

from gradcheck.model.findings import Severity

CASES = str(TESTS / "programs" / "kernel_tests" / "cases.py")
CAPTURED = str(TESTS / "programs" / "exec" / "captured_training.py")
FEATHERSTONE = str(TESTS / "programs" / "kernel_tests" / "train_featherstone.py")


def audit(program: str, *args: str, **options):
    from gradcheck.engine.program_audit import audit_program

    result, run = audit_program(program, list(args), **options)
    assert run.status in (None, 0), run.error
    return result


def adjoint_findings(result) -> list[tuple[str, str]]:
    return [(f.severity.name.lower(), f.subject) for f in result.findings if f.check == "adjoint-mismatch"]


def statuses(result) -> dict[str, dict[str, int]]:
    return {row.kernel: row.statuses for row in result.blame.kernels}


@pytest.mark.parametrize(
    ("case", "kernels"),
    [
        ("copy", {"square", "total"}),  # the wp.copy between them is an edge of the gradient path
        ("view", {"square", "total_2d"}),  # the loss reads y.reshape(...): a view is the array it views
        ("two-seeds", {"square", "sine"}),  # backward(grads={a: ..., b: ...}): both seeded arrays are losses
        ("clean-trained", {"apply_cube_right", "sq_error"}),
        ("eval-first", {"square", "total"}),  # recordings never differentiated come first: let go, tried again
        ("accumulate", {"accumulate", "total"}),  # a launch adding into an output passes the earlier value on
        ("hand-seeded", {"sine"}),  # y.grad.fill_(1.0); tape.backward(): y is the loss
    ],
)
def test_every_kernel_on_the_path_is_tested_and_a_right_one_is_silent(case, kernels):
    result = audit(CASES, "--case", case)
    assert statuses(result) == {kernel: {"ok": 1} for kernel in kernels}
    assert result.findings == ()


@pytest.mark.parametrize("case", ["custom-trained", "host-trained"])
def test_a_wrong_hand_written_adjoint_the_program_trains_with_is_an_error(case):
    """Trained by an update kernel, or on the host (``x.assign(x.numpy() - lr * x.grad.numpy())``): the leaf moved."""
    result = audit(CASES, "--case", case)
    (finding,) = [f for f in result.findings if f.check == "adjoint-mismatch"]
    assert finding.severity == Severity.ERROR and "apply_cube (cases.py:" in finding.subject
    assert finding.evidence["launches"][0]["custom_adjoint"] == ["cube"]


@pytest.mark.parametrize("case", ["custom-one-shot", "straight-through", "ste-plus-reg", "reversal"])
def test_a_hand_written_adjoint_that_may_be_meant_is_no_verdict(case):
    """A test of the custom-gradient mechanism (one backward, nothing learned), and surrogates a training loop learns
    from: a straight-through estimator (the function flat where its adjoint is not), also beside a smooth term of
    the same kernel, and a gradient reversal scaled by 0.1: at most an info naming the function, never an error."""
    result = audit(CASES, "--case", case)
    (finding,) = [f for f in result.findings if f.check == "adjoint-mismatch"]
    assert finding.severity == Severity.INFO and "no verdict" in finding.message
    assert "hand-written adjoint of @wp.func" in finding.message
    assert not [f for f in result.findings if f.severity >= Severity.WARNING]


def test_a_launch_flat_in_float32_where_its_adjoint_is_not_is_no_verdict():
    """(1e6 + x) - 1e6 with x ~ 1e-3: right in real arithmetic, flat in float32 (the sum rounds to the offset), so
    the launch's central differences miss what its (right) adjoint sees: a numerical analyst signs no error."""
    result = audit(CASES, "--case", "flat-float32")
    assert statuses(result)["offset_cancelled"] == {"no-verdict": 1}
    assert not [f for f in result.findings if f.severity >= Severity.WARNING]


@pytest.mark.parametrize("capture", ["both", "forward"])
def test_a_forward_captured_in_a_graph_is_tested_from_its_replay(capture):
    """Nothing runs while a graph is captured; its forward is run again from copies before the graph's first run
    on the CPU, the first point its launches can be copied, and tested from there (backward in the graph or not)."""
    result = audit(CAPTURED, "--capture", capture, "--iterations", "3", "--device", "cpu")
    assert statuses(result) == {"double": {"ok": 1}, "squared_distance": {"ok": 1}}


def test_the_switch_turns_the_test_off_and_the_fast_parser_reads_it(tmp_path):
    from gradcheck.cli.exec_fast import _options, _parse
    from gradcheck.cli.exec_program import exec_program

    values = _parse(["--no-adjoint-test", "prog.py"], _options(exec_program))
    assert values["adjoint_test"] is False and values["program"] == ["prog.py"]
    assert _parse(["prog.py"], _options(exec_program))["adjoint_test"] is True
    off = audit(CASES, "--case", "custom-trained", adjoint_test=False)
    assert off.blame is None and adjoint_findings(off) == []
    report = str(tmp_path / "report.json")
    assert cli_in_process("exec", "--output", report, CASES, "--case", "custom-trained").returncode == 1
    assert (
        cli_in_process("exec", "--no-adjoint-test", "--output", report, CASES, "--case", "custom-trained").returncode
        == 0
    )


def test_the_report_says_how_many_kernels_were_tested_in_one_line(tmp_path):
    report = tmp_path / "report.txt"
    proc = cli_in_process("exec", "--output", str(report), CASES, "--case", "copy")
    assert proc.returncode == 0
    assert "adjoint test (the first launch of each kernel): 2 of 2 kernels tested (2 ok)" in report.read_text()


def test_a_kernel_is_tested_again_when_its_argument_types_or_loop_counts_change():
    """The selection itself, on real kernels: one test a kernel and argument types, again when a run-time loop it
    reads first iterates more than once, or when an array's ndim or dtype changes."""
    import importlib.util

    import warp as wp

    from gradcheck.source.kernel_signature import signature
    from gradcheck.source.loop_bounds import loops_iterating, runtime_loops

    spec = importlib.util.spec_from_file_location("kernel_test_cases", CASES)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kernel = module.looped
    assert runtime_loops(kernel) == 1
    x = wp.zeros(4, dtype=float)
    names = ["x", "n", "y"]
    assert loops_iterating(kernel, names, [x, 1, x]) == (False,)
    assert loops_iterating(kernel, names, [x, 3, x]) == (True,)
    key32, _ = signature(kernel, [x, 1, x])
    key64, _ = signature(kernel, [wp.zeros(4, dtype=wp.float64), 1, x])
    assert key32 != key64


@pytest.mark.slow
def test_featherstone_split_adjoint_is_never_an_error_under_exec():
    """Newton's Featherstone: the Cholesky's adjoint is a no-op and the solve's covers both. Tested with its
    neighbours on the program's first recording (copied whole), it is a split adjoint (info), on the stock solver
    (scratch shared by every step) and on per-step scratch alike."""
    for scratch in ("per-step", "shared"):
        result = audit(FEATHERSTONE, "30", scratch)
        assert [f for f in adjoint_findings(result) if f[0] != "info"] == []
        rows = statuses(result)
        assert rows["eval_dense_cholesky_batched"].keys() <= {"split", "no-verdict"}
        assert sum(1 for row in rows.values() if "ok" in row) >= 10
