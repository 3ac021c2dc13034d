"""missing-gradient says where the chain from a param to the loss breaks, under `exec` and under `run`.

tests/programs/exec/broken_chain.py (a plain training script, ``--cause C``) and the built-in scenario ``chains``
(scenarios/chains.py, ``--fault F``) each break the chain from ``offset`` to the loss in one way: a kernel built
with enable_backward=False, an intermediate without a gradient, a host round trip, a launch off the tape, a
wp.copy Warp did not record, a param passed as a float, wp.floor. The missing-gradient finding on ``offset.grad``
must be an error whose ``evidence["break"]`` names the cause, the array and the launch with its line (found in
the source here, never hard-coded); the clean variants have no missing-gradient finding (``chains``: no finding
at all). ``ad_vs_fd`` measures the numbers scenarios/chains.py documents: each fault is a real broken chain.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, TESTS, by_check, exec_json, line_of, run_scenario

from gradcheck.model.findings import Severity

PROGRAM = TESTS / "programs" / "exec" / "broken_chain.py"
CHAINS = ROOT / "scenarios" / "chains.py"


def at(kernel: str, path: Path, text: str, after: str | None = None) -> str:
    """How a break names a launch: ``kernel (file.py:line)``."""
    return f"{kernel} ({path.name}:{line_of(path, text, after)})"


def offset_break(findings):
    """The one missing-gradient finding on offset.grad: an error with a break."""
    (finding,) = [f for f in by_check(findings, "missing-gradient") if f.subject == "offset.grad"]
    assert finding.severity == Severity.ERROR
    assert "; the chain to the loss breaks: " in finding.message, finding.message
    return finding


def assert_break(finding, cause: str, array: str, launch: str | None) -> None:
    found = finding.evidence["break"]
    assert (found["cause"], found["array"], found["launch"]) == (cause, array, launch), finding.message
    assert (launch or array) in finding.message
    assert finding.hint and "read the array under the tape" not in finding.hint  # the break's fix, not the generic one


# -- exec: the plain script, in this process through engine.program_audit (what `gradcheck exec` runs) ------------

EXEC_CASES = {
    "no-backward": ("no-backward", "offset", at("shift_forward_only", PROGRAM, "wp.launch(shift_forward_only")),
    "no-grad-intermediate": ("no-grad", "z", at("squared_error", PROGRAM, "wp.launch(squared_error")),
    "host-round-trip": ("host-round-trip", "shifted", at("numpy()", PROGRAM, "z = wp.array(shifted.numpy()")),
    "before-tape": (
        "outside-tape",
        "offset",
        at("shift", PROGRAM, "wp.launch(shift, dim=n", after='if cause == "before-tape":'),
    ),
    "unrecorded-copy": ("unrecorded-copy", "shifted", at("wp.copy", PROGRAM, "wp.copy(plain, shifted)")),
    "never-read": ("never-read", "offset", None),
    "no-adjoint-builtin": ("no-adjoint-builtin", "offset", at("shift_floored", PROGRAM, "wp.launch(shift_floored")),
}


@functools.cache
def audited(cause: str):
    from gradcheck.engine.program_audit import audit_program

    result, run = audit_program(str(PROGRAM), ["--cause", cause, "--iters", "2"])
    assert run.status in (None, 0), run.error
    return result


@pytest.mark.parametrize("cause", list(EXEC_CASES))
def test_exec_names_where_the_offsets_chain_breaks(cause):
    expected, array, launch = EXEC_CASES[cause]
    finding = offset_break(audited(cause).findings)
    assert_break(finding, expected, array, launch)
    if cause == "no-adjoint-builtin":  # the call without an adjoint, with its own line
        assert f"broken_chain.py:{line_of(PROGRAM, 'wp.floor(offset[0] * 4.0)')}" in finding.message


def test_exec_clean_program_has_no_missing_gradient():
    result = audited("clean")
    assert by_check(result.findings, "missing-gradient") == []
    assert [p.subject for p in result.params] == ["gain.grad", "offset.grad"]


@pytest.mark.slow  # a whole process (or Newton's kernels): the long lane
def test_exec_cli_keeps_the_programs_output_and_names_the_break():
    args = [str(PROGRAM), "--cause", "unrecorded-copy"]
    python = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300)
    proc, scenario = exec_json(*args, timeout=300)
    assert python.returncode == 0 and proc.returncode == 1  # an error finding; the program itself ended well

    def iterations(out: str) -> list[str]:
        return [line for line in out.splitlines() if line.startswith("iter ")]

    assert iterations(proc.stdout) == iterations(python.stdout) != []
    (finding,) = [f for f in by_check(scenario["findings"], "missing-gradient") if f["subject"] == "offset.grad"]
    copy = at("wp.copy", PROGRAM, "wp.copy(plain, shifted)")
    assert finding["severity"] == "error" and finding["evidence"]["break"]["cause"] == "unrecorded-copy"
    assert "the chain to the loss breaks: " in finding["message"] and copy in finding["message"]
    assert finding["evidence"]["break"]["launch"] == copy


# -- run: the built-in scenario `chains` ------------------------------------------------------------------------

SPREAD = "wp.launch(kernel, dim=POINTS, inputs=[self.offset]"
RUN_CASES = {
    "no-backward": ("no-backward", "offset", at("broadcast_forward_only", CHAINS, SPREAD)),
    "no-grad-intermediate": ("no-grad", "bump", at("combine", CHAINS, "wp.launch(combine, dim=POINTS")),
    "host-round-trip": ("host-round-trip", "bump", at("numpy()", CHAINS, "return wp.array(self.bump.numpy()")),
    "outside-tape": ("outside-tape", "offset", at("broadcast", CHAINS, SPREAD)),
    "unrecorded-copy": ("unrecorded-copy", "bump", at("wp.copy", CHAINS, "wp.copy(self.plain, self.bump)")),
    # the value is taken to the host inside the forward and handed to the kernel as a float: that read is named
    "never-read": ("never-read", "offset", at("numpy()", CHAINS, "float(self.offset.numpy()[0])")),
    "no-adjoint-builtin": ("no-adjoint-builtin", "offset", at("broadcast_snapped", CHAINS, SPREAD)),
}


def test_run_cases_cover_every_fault_of_chains():
    from gradcheck.scenarios.chains import BrokenChains

    assert set(RUN_CASES) == set(BrokenChains.faults)


@pytest.mark.parametrize("fault", list(RUN_CASES))
def test_run_names_where_the_offsets_chain_breaks(fault):
    result, _ = run_scenario("chains", fault=fault, passes=2)
    assert result.error is None, result.error
    expected, array, launch = RUN_CASES[fault]
    finding = offset_break(result.findings)
    assert_break(finding, expected, array, launch)
    if fault == "no-adjoint-builtin":
        assert f"chains.py:{line_of(CHAINS, 'wp.floor(offset[0] * GRID)')}" in finding.message
    verdicts = {p.subject: p.verdict for p in result.params}
    assert verdicts["gain.grad"] == "ok"  # gain's chain is intact in every variant


def test_run_clean_chains_has_no_finding():
    result, report = run_scenario("chains", passes=2)
    assert result.error is None and result.findings == (), [(f.check, f.message) for f in result.findings]
    assert report.exit_code == 0


# -- the numbers scenarios/chains.py documents ------------------------------------------------------------------


def ad_vs_fd(fault: str | None, step: float = 1e-2) -> dict[str, tuple[float, float]]:
    """param → (dL/dp by one tape.backward, central finite difference of the loss with ``step``, in float64)."""
    import numpy as np
    import warp as wp

    from gradcheck.scenarios.chains import BrokenChains

    scenario = BrokenChains()
    scenario.setup("cpu", fault)
    tape = wp.Tape()
    with tape:
        loss = scenario.forward()
    tape.backward(loss)
    out = {}
    for name, param in scenario.params().items():
        ad = float(param.grad.numpy()[0])
        base = param.numpy().copy()
        sides = []
        for sign in (1.0, -1.0):
            param.assign(base + np.float32(sign * step))
            sides.append(float(np.float64(scenario.forward().numpy()[0])))
        param.assign(base)
        out[name] = (ad, (sides[0] - sides[1]) / (2.0 * step))
    return out


@pytest.mark.filterwarnings("ignore::UserWarning")  # Warp warns about the enable_backward=False kernel on the tape
@pytest.mark.parametrize("fault", [None, *RUN_CASES])
def test_each_fault_is_a_real_broken_chain(fault):
    measured = ad_vs_fd(fault)
    gain_ad, gain_fd = measured["gain"]
    assert gain_ad == pytest.approx(-0.3887, abs=1e-4) and gain_fd == pytest.approx(gain_ad, abs=1e-4)
    ad, fd = measured["offset"]
    if fault is None:
        assert ad == pytest.approx(-0.4, abs=1e-4) and fd == pytest.approx(ad, abs=1e-4)
    else:  # the loss depends on the offset, its gradient is exactly zero
        assert ad == 0.0
        assert fd == pytest.approx(-0.3914 if fault == "no-adjoint-builtin" else -0.4, abs=1e-3)
