"""`gradcheck exec`: an unmodified program audited like under a sanitizer.

The seed mistakes are plain scripts (tests/programs/exec/training_loop.py --mistake NAME): each must give its
finding at the right iteration, and the correct loop (and deliberate accumulation) none. In this process
through engine.program_audit (what the command runs), once through the real CLI; in the slow lane, Newton's own
diffsim examples, unmodified, must audit clean.
"""

from __future__ import annotations

import json

import pytest
from conftest import TESTS, cli, exec_json

from gradcheck.model.exit_codes import ExitCode

LOOP = str(TESTS / "programs" / "exec" / "training_loop.py")
LOOP_ITERATIONS = 5  # training_loop.py's default --iterations: one backward each (two with --mistake accumulate)
BACKWARD_LINE = next(i for i, line in enumerate(open(LOOP), 1) if "tape.backward(loss)" in line)


def audit(*args: str):
    from gradcheck.engine.program_audit import audit_program

    result, run = audit_program(LOOP, list(args))
    assert run.status in (None, 0), run.error
    return result


def found(result) -> list[tuple[str, str, int]]:
    """(check, subject, first iteration) of every warning and error."""
    return [(f.check, f.subject, _first(f)) for f in result.findings if f.severity.label != "info"]


def _first(finding) -> int:
    evidence = finding.evidence
    for key in ("first_iteration", "first_pass", "passes"):
        value = evidence.get(key)
        if value is not None:
            return value[0] if isinstance(value, list) else value
    return 0


@pytest.mark.parametrize("mistake", ["none", "accumulate"])
def test_a_correct_loop_gets_a_clean_audit(mistake):
    """Deliberate accumulation (two backwards at the same params, then one step) is not a mistake."""
    result = audit("--mistake", mistake)
    assert found(result) == []
    assert result.passes == LOOP_ITERATIONS * (2 if mistake == "accumulate" else 1)
    # x is a parameter because the loop updates it from its gradient; b is a leaf nothing updates (not shown)
    assert [(p.subject, p.role) for p in result.params] == [("x.grad", "updated")]
    assert len(result.params[0].norms) == result.passes


@pytest.mark.parametrize(
    ("mistake", "expected"),
    [
        # a new tape each iteration, zeroed before it recorded anything: the param's gradient carries the last
        # iteration's (accumulation), and tape.zero() left both gradients (zero-audit)
        ("new-tape-zero", [("accumulation", "x.grad", 2), ("zero-audit", "x.grad", 1), ("zero-audit", "b.grad", 1)]),
        # only the optimised param zeroed by hand: the other leaf's gradient is left (nothing reads it into x)
        ("params-only-zeroed", [("zero-audit", "b.grad", 1)]),
        ("target-changed", [("changed-before-backward", "target", 3)]),
        ("nan-at", [("nonfinite", "x.grad", 3)]),  # b's NaN is an info: nothing updates b
        ("optimizer-in-place", [("mutated-gradient", "x.grad", 1)]),
        # the struct keeps the gradient pointer it was built with: backward writes into a hidden buffer
        ("struct-requires-grad-off", [("stale-adjoint", "shift.b.grad", 1)]),
    ],
)
def test_each_seed_mistake_is_found_at_its_iteration(mistake, expected):
    result = audit("--mistake", mistake)
    assert found(result) == expected
    first = result.findings[0]
    assert all(
        f.severity.label == "error" for f in result.findings if f.check != "zero-audit" and f.severity.label != "info"
    )
    if mistake in ("new-tape-zero", "target-changed", "nan-at"):
        assert first.evidence["site"].endswith(f"training_loop.py:{BACKWARD_LINE}")  # the tape.backward call
    if mistake == "optimizer-in-place":
        assert "sgd_in_place (training_loop.py:" in first.message and "host read (training_loop.py:" in first.message
    if mistake == "nan-at":
        assert "the forward loss was finite" in first.message


def test_the_allocation_ledger_watches_from_the_programs_own_warp_init():
    """gradcheck does not initialise Warp around a program (Warp's banner, a forgotten wp.init()), so the ledger
    wraps the allocators when the program initialises Warp: the freed gradient memory is still known as freed."""
    proc, scenario = exec_json(LOOP, "--mistake", "aos-freed")
    dangling = [f for f in scenario["findings"] if f["check"] == "dangling-adjoint"]
    assert dangling and {f["evidence"]["kind"] for f in dangling} <= {"freed", "reused"}, proc.stderr[-2000:]


@pytest.mark.parametrize("keep_going", [False, True])
def test_a_dangling_pointer_stops_the_program_before_backward_writes_through_it(keep_going):
    """Array-of-structs records pointing at freed gradient memory: like a sanitizer, the program is stopped before
    the first backward (or, with --keep-going, every such backward is skipped and the program goes on)."""
    from gradcheck.engine.program_audit import audit_program

    result, run = audit_program(LOOP, ["--mistake", "aos-freed"], keep_going=keep_going)
    dangling = [f for f in result.findings if f.check == "dangling-adjoint"]
    assert [f.subject for f in dangling] == [f"parts[{i}].b.grad" for i in range(4)]
    assert all(f.evidence["passes"][0] == 1 for f in dangling)
    assert result.error is None
    if keep_going:
        assert run.status in (None, 0) and result.passes == LOOP_ITERATIONS and "were not launched" in result.notes[0]
    else:
        assert (
            run.stopped and result.passes == 1 and "gradcheck stopped the program before backward #1" in result.notes[0]
        )


def test_the_cli_runs_the_program_with_its_arguments_and_reports_after_it():
    iterations = 4
    proc = cli("exec", "--format", "json", LOOP, "--mistake", "new-tape-zero", "--iterations", str(iterations))
    assert proc.returncode == ExitCode.FINDINGS, proc.stderr[-2000:]
    program_output, _, report = proc.stdout.partition("{\n")
    assert program_output.startswith("loss") or "loss" in program_output  # the program's own print, untouched
    data = json.loads("{\n" + report)
    (scenario,) = data["scenarios"]
    assert scenario["name"] == LOOP and scenario["passes"] == iterations
    assert {f["check"] for f in scenario["findings"]} == {"accumulation", "zero-audit"}


def test_a_failing_program_is_exit_3_with_its_status_and_the_audit_kept(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text(
        f"import runpy, sys\nsys.argv = [{LOOP!r}, '--iterations', '2']\n"
        f"runpy.run_path({LOOP!r}, run_name='__main__')\nraise SystemExit('gave up after two steps')\n"
    )
    proc = cli("exec", "--format", "json", str(script))
    assert proc.returncode == ExitCode.SCENARIO_ERROR
    data = json.loads(proc.stdout[proc.stdout.index("{\n") :])
    assert data["scenarios"][0]["passes"] == 2 and "gave up after two steps" in data["scenarios"][0]["error"]
    missing = cli("exec", str(tmp_path / "nope.py"))
    assert missing.returncode == ExitCode.USAGE and "no such script" in missing.stderr


@pytest.mark.slow  # ~40 s on 2 cores with a cold cache (Newton's kernels in a fresh process); the fast lane keeps
# exec's own checks on training_loop.py and Newton's solvers in-process (test_cartpole.py, test_programs.py)
def test_newton_diffsim_ball_runs_unmodified_and_audits_clean():
    from gradcheck.scenarios._featherstone import newton_missing

    if newton_missing():
        pytest.skip(newton_missing())
    args = ["-m", "newton.examples", "diffsim_ball", "--viewer", "null", "--num-frames", "3", "--device", "cpu"]
    proc = cli("exec", "--format", "json", *args)
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
    data = json.loads(proc.stdout[proc.stdout.index("{\n") :])
    (scenario,) = data["scenarios"]
    assert scenario["name"] == "newton.examples diffsim_ball" and scenario["passes"] >= 2
    assert [f for f in scenario["findings"] if f["severity"] != "info"] == []
    # the param is what the example's step kernel updates from its gradient: the initial particle velocity
    assert [(p["subject"], p["role"]) for p in scenario["params"]] == [("ex.states[0].particle_qd.grad", "updated")]


@pytest.mark.slow
@pytest.mark.parametrize("example", ["diffsim_spring_cage", "diffsim_cloth", "diffsim_soft_body", "diffsim_drone"])
def test_newtons_other_diffsim_examples_audit_clean(example):
    """The other diffsim examples that run on CPU (diffsim_bear needs usd-core), unmodified. Each has one param,
    the array its optimizer updates; they capture forward+backward in a graph, so every replay is a backward. The
    drone's cost reads the next control before the step writes it: a write-after-read warning, seen by replaying
    its captured forward from copies (the program's own state untouched), and nothing else."""
    from gradcheck.scenarios._featherstone import newton_missing

    if newton_missing():
        pytest.skip(newton_missing())
    args = ["-m", "newton.examples", example, "--viewer", "null", "--num-frames", "2", "--device", "cpu"]
    proc, scenario = exec_json(*args)
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]  # a warning does not fail --fail-on error
    assert scenario["passes"] >= 1 and not scenario.get("error")
    assert [p["role"] for p in scenario["params"]] == ["updated"]
    loud = [(f["check"], f["severity"], f["subject"]) for f in scenario["findings"] if f["severity"] != "info"]
    if example == "diffsim_drone":
        assert loud == [("write-after-read", "warning", "example.rollouts.controls[*].prop_controls")]
        assert "drone_cost → interpolate_control_linear" in scenario["findings"][0]["message"]
    else:
        assert loud == []


@pytest.mark.skipif(__import__("sys").platform != "linux", reason="signals")
def test_ctrl_c_in_the_program_still_reports_what_ran(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    from conftest import ROOT, default_sigint, stop, wait_for

    iterations = 3  # the training steps before the program hangs: the report's passes
    marker = tmp_path / "sleeping"
    script = tmp_path / "trains_then_hangs.py"
    script.write_text(
        f"import pathlib, runpy, sys, time\nsys.argv = [{LOOP!r}, '--iterations', '{iterations}']\n"
        f"runpy.run_path({LOOP!r}, run_name='__main__')\npathlib.Path({str(marker)!r}).write_text('1')\n"
        "time.sleep(3600)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "gradcheck", "exec", "--format", "json", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        preexec_fn=default_sigint,  # as from a terminal: a background job's children inherit SIGINT ignored
    )
    try:
        wait_for(marker.exists, within=240, what="the program's training steps", proc=proc)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        stop(proc)
    assert proc.returncode == ExitCode.INTERRUPTED and "Traceback" not in err, err[-2000:]
    data = json.loads(out[out.index("{\n") :])
    assert data["error"].startswith("interrupted by Ctrl-C") and data["scenarios"][0]["passes"] == iterations
    assert os.path.exists(marker)


NON_FLOAT_GRADIENTS = """
import numpy as np
import warp as wp

@wp.struct
class Pair:
    a: float
    v: wp.vec3

@wp.kernel
def total(xs: wp.array(dtype=Pair), flags: wp.array(dtype=wp.int32), x: wp.array(dtype=float),
          loss: wp.array(dtype=float)):
    i = wp.tid()
    s = xs[i]
    wp.atomic_add(loss, 0, ((s.a + s.v[0]) * float(flags[i]) + 1.0) * x[i] * x[i])

@wp.kernel
def sgd(x: wp.array(dtype=float), g: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = x[i] - 0.1 * g[i]

xs = wp.zeros(4, dtype=Pair, requires_grad=True)  # an array of structs that requires grad (Warp's test_tape)
flags = wp.array(np.ones(4, dtype=np.int32), dtype=wp.int32, requires_grad=True)  # an int array that does too
x = wp.array([1.0, 2.0, 3.0, 4.0], dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
for _ in range(3):
    loss.zero_()
    with tape:
        cloned = wp.clone(xs)
        wp.launch(total, dim=4, inputs=[cloned, flags, x], outputs=[loss])
    tape.backward(loss)
    wp.launch(sgd, dim=4, inputs=[x, x.grad])
    tape.zero()
    tape.reset()
print("x", x.numpy().tolist())
"""


def test_gradients_of_structs_and_ints_are_no_internal_error(tmp_path):
    """Arrays of structs and of ints may require grad (Warp's own test_tape does both): their gradient buffers
    carry no float values gradcheck's statistics read, so they are left out of the zero audit and the leaves,
    never an internal error on a correct program."""
    script = tmp_path / "non_float_gradients.py"
    script.write_text(NON_FLOAT_GRADIENTS)
    proc, scenario = exec_json(str(script))
    assert [f["message"] for f in scenario["findings"] if f["severity"] != "info"] == []
    assert proc.returncode == ExitCode.OK and "x [" in proc.stdout, proc.stderr[-2000:]
    assert scenario["passes"] == 3 and [p["subject"] for p in scenario["params"]] == ["x.grad"]


BORROWED = str(TESTS / "programs" / "exec" / "borrowed_memory.py")
BORROWED_STEPS = 6  # borrowed_memory.py's default --steps: one backward each


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # owners freed after each step and their blocks reused: nothing may be read again, nothing is found
        (("--owners", "fresh"), []),
        (("--owners", "kept"), []),
        # the same wrappers kept alive: a forgotten tape.zero() is found on them like on any array
        (("--owners", "kept", "--mistake", "no-zero"), [("accumulation", "x.grad"), ("zero-audit", "x.grad")]),
    ],
)
def test_arrays_on_borrowed_memory_are_read_only_while_their_owner_lives(args, expected):
    """wp.array(ptr=...) owns nothing: re-reading one after its owner was freed read another array's values
    (gradient norms of 1e35: explosion errors and zero-audit warnings on a correct program)."""
    from gradcheck.engine.program_audit import audit_program

    result, run = audit_program(BORROWED, list(args))
    assert run.status in (None, 0), run.error
    assert [(f.check, f.subject) for f in result.findings if f.severity.label != "info"] == expected
    assert result.passes == BORROWED_STEPS
    not_read = [n for n in result.notes if "do not own" in n]
    assert bool(not_read) == (args[1] == "fresh")


PREFILLED = str(TESTS / "programs" / "exec" / "prefilled_gradients.py")


@pytest.mark.parametrize(
    ("mistake", "expected"),
    [
        ("none", []),
        # x.grad is overwritten by the program's fill_ before each backward: only its last leftover (no backward
        # after it) is one; b.grad keeps every backward's gradient from the first on
        ("fresh-tape-zero", [("zero-audit", "b.grad", 1), ("zero-audit", "x.grad", 4)]),
    ],
)
def test_a_gradient_set_on_purpose_after_tape_zero_is_no_leftover(mistake, expected):
    """Warp's test_tape prefills x.grad (fill_(0.25)) between tape.zero() and backward, and expects the sum: the
    zero audit, which waits for the end of the zero step, took that seed for what tape.zero() had left."""
    from gradcheck.engine.program_audit import audit_program

    result, run = audit_program(PREFILLED, ["--mistake", mistake])
    assert run.status in (None, 0), run.error
    assert found(result) == expected


UNITTEST_MODULE = str(TESTS / "programs" / "exec" / "unittest_module.py")


@pytest.mark.parametrize("mistake", ["none", "no-zero"])
def test_a_unittest_module_is_named_from_its_own_frames(mistake):
    """Warp's and Newton's tests are unittest modules: arrays are locals of test methods (gone when the report is
    written), every call passes through unittest's frames. Subjects are the test's variables, sites its lines."""
    from gradcheck.engine.program_audit import audit_program

    result, run = audit_program(UNITTEST_MODULE, ["--mistake", mistake])
    assert run.status in (None, 0), run.error
    if mistake == "none":
        assert found(result) == []
        return
    assert found(result)[:2] == [("accumulation", "weights.grad", 2), ("zero-audit", "weights.grad", 1)]
    subjects = [f.subject for f in result.findings]
    assert not any(s.startswith("array#") for s in subjects), subjects
    sites = [f.evidence.get("site") for f in result.findings if f.evidence.get("site")]
    assert sites and all(s.startswith(UNITTEST_MODULE + ":") for s in sites), sites


LONG_FIT = str(TESTS / "programs" / "exec" / "long_fit.py")


@pytest.mark.parametrize(
    ("args", "cadence", "expected"),
    [
        (("--iters", "400"), None, []),
        # forgotten from backward 200: after the first 64, the pairs audited are (192, 193), (320, 321): 320
        (("--iters", "400", "--forget-zero-from", "200"), None, [("accumulation", "x.grad", 321)]),
        # every backward audited: found at the second backward without a zero step before it
        (("--iters", "400", "--forget-zero-from", "200"), (64, 1), [("accumulation", "x.grad", 201)]),
        (("--iters", "400", "--forget-zero-from", "10"), None, [("accumulation", "x.grad", 11)]),
    ],
)
def test_a_long_program_is_audited_in_sampled_pairs(args, cadence, expected):
    """Cost flat in training length: the first 64 backwards in full, then every 128th and the one after it. A
    mistake that persists is found at the first audited pair after it starts; a correct loop stays clean."""
    from gradcheck.engine.program_audit import audit_program

    result, run = audit_program(LONG_FIT, list(args), cadence=cadence)
    assert run.status in (None, 0), run.error
    assert [(f.check, f.subject, _first(f)) for f in result.findings if f.severity.label == "error"] == expected
    assert result.passes == 400
    if cadence == (64, 1):  # every backward audited; the records past the cap are not kept, and it says so
        assert dict(result.sampling) == {
            "first": 64, "every": 1, "backwards": 400, "audited": 400, "records_kept": 80, "norm_points": 64,
        }  # fmt: skip
    else:  # the pairs at 192/193 and 320/321 after the first 64
        assert dict(result.sampling) == {
            "first": 64, "every": 128, "backwards": 400, "audited": 68,
            "records_kept": len(result.losses), "norm_points": 64,
        }  # fmt: skip


def test_a_stale_struct_gradient_pointer_backward_never_writes_through_is_no_error():
    """The mirror keeps the old .grad, but the component store's adjoint reads the live one (the program checks
    src.grad == 3.0, which only the new buffer holds) and the old buffer stays zero: an info, not an error. The
    orphan that backward does write into (struct-requires-grad-off above) stays an error."""
    from gradcheck.engine.program_audit import audit_program

    result, run = audit_program(str(TESTS / "programs" / "exec" / "struct_grad_seed.py"), [])
    assert run.status in (None, 0), run.error
    assert [(f.check, f.severity.label, f.subject) for f in result.findings] == [
        ("stale-adjoint", "info", "holder.values.grad")
    ]
    assert "backward has written nothing into it" in result.findings[0].message


def test_launch_arguments_that_only_look_like_arrays_are_no_internal_error():
    """Warp's test_array_subclass passes a host-only fixedarray (Warp refuses it, the program expects that) and an
    object whose __class__ claims wp.array: the launch observer read .ptr off both (internal-error, exit 1)."""
    from gradcheck.engine.program_audit import audit_program

    result, run = audit_program(str(TESTS / "programs" / "exec" / "odd_launch_arguments.py"), [])
    assert run.status in (None, 0), run.error
    assert [(f.check, f.message) for f in result.findings] == []


@pytest.mark.parametrize(
    ("mistake", "expected"),
    [("none", []), ("reuse", [("accumulation", "a.grad", 2), ("zero-audit", "a.grad", 1)])],
)
def test_another_tests_backward_and_reset_are_not_about_the_last_ones_gradients(mistake, expected):
    """Warp's test_overwrite: one test updates its array and ends; the next test runs a backward over arrays of its
    own and resets its tape. The first test's gradient was blamed on that backward or that reset (zero-audit
    warnings on a correct module); a backward that does add to it is still an accumulation."""
    from gradcheck.engine.program_audit import audit_program

    result, run = audit_program(str(TESTS / "programs" / "exec" / "two_unittests.py"), ["--mistake", mistake])
    assert run.status in (None, 0), run.error
    assert found(result) == expected


@pytest.mark.parametrize(("step", "expected"), [("linear", []), ("square", [("write-after-read", "s", 0)])])
def test_a_rewritten_scratch_is_a_hazard_only_where_the_readers_adjoint_reads_it(step, expected):
    """Warp's Navier-Stokes example reuses FFT scratch between linear stages (correct: their adjoints never read the
    values); the same reuse between squares makes the tape's gradient 18 where the analytic one is 15."""
    from gradcheck.engine.program_audit import audit_program

    result, run = audit_program(str(TESTS / "programs" / "exec" / "reused_scratch.py"), ["--step", step])
    assert run.status in (None, 0), run.error
    assert found(result) == expected


@pytest.mark.parametrize(
    ("mistake", "expected"),
    [
        ("none", []),
        ("no-zero", [("accumulation", "p.w.grad", 2), ("zero-audit", "x.grad", 1), ("zero-audit", "p.w.grad", 1)]),
    ],
)
def test_gradients_read_through_the_tapes_own_api_are_the_live_ones(mistake, expected):
    """tape.get_adjoint(struct) builds a fresh adjoint struct from the live fields' .grad; tape.gradients[x] is
    x.grad: a loop stepping from them is clean, and the same loop without tape.zero() accumulates in the struct
    field's gradient (which the zero audit must reach through the struct)."""
    from gradcheck.engine.program_audit import audit_program

    result, run = audit_program(
        str(TESTS / "programs" / "exec" / "adjoints_through_the_tape.py"), ["--mistake", mistake]
    )
    assert run.status in (None, 0), run.error
    assert found(result) == expected
