"""`gradcheck exec --blame`: the per-launch adjoint test on an unmodified training script, no scenario needed.

tests/programs/exec/wrong_kernel_training.py fits lights held in a ``wp.struct`` through kernels that take it;
``--kernel NAME`` swaps in a wrong one (a loop whose trip count is a struct field, a forgetful ``@wp.func_grad``,
a non-additive in-place update). Each must be named by kernel and line at the first backward, the clean twin must
stay silent, and the program must print what it prints under python. In this process through
engine.program_audit (what the command runs); once through the real CLI.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import TESTS, exec_json

from gradcheck.model.findings import Severity

PROGRAM = str(TESTS / "programs" / "exec" / "wrong_kernel_training.py")
SOURCE = open(PROGRAM).read().splitlines()
SHADE_LINE = next(i for i, line in enumerate(SOURCE, 1) if "wp.launch(kernel, dim=n" in line)
IN_PLACE_LINE = next(i for i, line in enumerate(SOURCE, 1) if "wp.launch(expose_in_place" in line)
LOOP_LINE = next(i for i, line in enumerate(SOURCE, 1) if "for k in range(lights.num_lights)" in line)
STORE_LINE = next(i for i, line in enumerate(SOURCE, 1) if line.strip() == "s[i] = s[i] * exposure[i]")


def audit(*args: str, blame_at: int | None = 1, adjoint_test: bool = True):
    from gradcheck.engine.program_audit import audit_program

    result, run = audit_program(PROGRAM, list(args), blame_at=blame_at, adjoint_test=adjoint_test)
    assert run.status in (None, 0), run.error
    return result


def blamed(result) -> list:
    return [f for f in result.findings if f.check == "adjoint-mismatch" and f.severity >= Severity.WARNING]


def test_the_clean_program_has_every_launch_checked_and_stays_silent():
    result = audit("--kernel", "clean")
    assert blamed(result) == []
    rows = {row.kernel: row.statuses for row in result.blame.kernels}
    # the struct-taking kernel is checked like any other (it used to be "takes a struct argument: not replayed")
    assert rows == {"shade": {"ok": 1}, "expose": {"ok": 1}, "squared_error": {"ok": 1}}
    assert result.blame.why == "--blame at backward 1"


@pytest.mark.parametrize(
    ("kernel", "launch_line", "construct"),
    [
        ("runtime-loop", SHADE_LINE, f"wrong_kernel_training.py:{LOOP_LINE}"),
        ("forgetful", SHADE_LINE, None),
        ("in-place", IN_PLACE_LINE, f"wrong_kernel_training.py:{STORE_LINE}"),
    ],
)
def test_a_wrong_kernel_is_named_by_kernel_launch_and_construct(kernel, launch_line, construct):
    result = audit("--kernel", kernel)
    (finding,) = blamed(result)
    assert finding.severity == Severity.ERROR
    assert f"wrong_kernel_training.py:{launch_line}" in finding.subject
    if construct is not None:  # the line of the construct Warp differentiates wrongly, and its rewrite as the fix
        assert construct in finding.message and construct in finding.hint
    if kernel == "in-place":
        assert "expose_in_place.s in place" in finding.message and "separate output array" in finding.hint


def test_blame_at_a_later_backward_and_without_the_flag():
    later = audit("--kernel", "forgetful", blame_at=3)
    assert later.blame.why == "--blame at backward 3" and len(blamed(later)) == 1
    # without --blame the default adjoint test finds it too, on the kernel's first launch (tests/test_kernel_tests.py)
    plain = audit("--kernel", "forgetful", blame_at=None)
    assert plain.blame.why == "the first launch of each kernel" and len(blamed(plain)) == 1
    off = audit("--kernel", "forgetful", blame_at=None, adjoint_test=False)
    assert off.blame is None and blamed(off) == []


def test_the_cli_flag_keeps_the_programs_output_and_exit_status():
    python = subprocess.run(
        [sys.executable, PROGRAM, "--kernel", "runtime-loop"], capture_output=True, text=True, timeout=300
    )
    proc, scenario = exec_json("--blame", PROGRAM, "--kernel", "runtime-loop")
    assert proc.returncode == 1  # an error finding; the program itself ended well

    def losses(out: str) -> list[str]:
        return [line for line in out.splitlines() if line.startswith("loss ")]

    assert losses(proc.stdout) == losses(python.stdout) != []  # the program computed what it computes under python
    assert [f["check"] for f in scenario["findings"] if f["check"] == "adjoint-mismatch"] == ["adjoint-mismatch"]
    assert scenario["blame"]["kernels"][0]["kernel"] == "shade_runtime_loop"


def test_launches_captured_in_a_graph_are_listed_with_the_reason():
    """A launch recorded into a graph does not run then: nothing of its inputs can be copied, so blame says so
    for each (a run without capture checks them)."""
    from gradcheck.engine.program_audit import audit_program

    captured = str(TESTS / "programs" / "exec" / "captured_training.py")
    result, run = audit_program(captured, ["--capture", "both", "--iterations", "3", "--device", "cpu"], blame_at=1)
    assert run.status in (None, 0), run.error
    assert blamed(result) == []
    assert result.blame.not_checked == {
        "launched during graph capture: its inputs cannot be copied then (check it on a run without capture)": 2
    }
