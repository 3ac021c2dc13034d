"""A failing check or probe never hides the others: one internal-error finding names it, the rest is reported.

A check registered beside the real ones that raises, a post-pass probe that raises, and an observer hook that
raises inside an unmodified program: each becomes one error-level ``internal-error`` finding naming the component
and the exception (traceback in the evidence), every other finding is still there, JSON stays valid, exit 1.
"""

from __future__ import annotations

import json

from conftest import TESTS, cli

from gradcheck.model.exit_codes import ExitCode

LOOP = str(TESTS / "programs" / "exec" / "training_loop.py")


class _Raising:
    NAME = "raising"
    SUMMARY = "a check that fails"
    EXPLAIN = "raises"

    @staticmethod
    def check(trace, options=None):
        raise ValueError("the check broke on purpose")


def test_a_check_that_raises_is_one_finding_and_the_others_still_run(monkeypatch):
    import gradcheck
    from gradcheck import checks

    monkeypatch.setattr(checks, "REGISTRY", (_Raising, *checks.REGISTRY))
    report = gradcheck.check("spring-chain", fault="optimizer-in-place", passes=2, fd="off", replay=False)
    (result,) = report.scenarios
    (internal,) = [f for f in result.findings if f.check == "internal-error"]
    assert internal.severity.label == "error" and internal.subject == "check raising"
    assert "ValueError: the check broke on purpose" in internal.message
    assert "Traceback" in internal.evidence["traceback"] and "the rest of the report" in internal.message
    assert [f.check for f in result.findings if f.check != "internal-error"] == ["mutated-gradient"]
    assert report.exit_code == ExitCode.FINDINGS
    json.dumps(report.to_dict())  # still valid JSON


def test_a_probe_that_raises_costs_only_its_own_result(monkeypatch):
    import gradcheck
    from gradcheck.engine import post_pass

    class Broken(post_pass.FiniteDifferences):
        def run(self, c):
            raise RuntimeError("finite differences broke on purpose")

    monkeypatch.setattr(post_pass, "PROBES", (Broken(), *post_pass.PROBES[1:]))
    report = gradcheck.check("spring-chain", fault="nan-backward", passes=2)
    (result,) = report.scenarios
    assert result.error is None
    internal = [f for f in result.findings if f.check == "internal-error"]
    assert [f.subject for f in internal] == ["probe finite differences"]
    assert "RuntimeError: finite differences broke on purpose" in internal[0].message
    assert any(f.check == "nonfinite" for f in result.findings)  # the passes' own findings stand


def test_an_observer_failure_inside_a_program_is_reported_and_the_program_runs_on(monkeypatch):
    from gradcheck.engine.program_audit import audit_program
    from gradcheck.observe import leftovers

    def broken(self, *args, **kwargs):
        raise KeyError("the zero audit broke on purpose")

    monkeypatch.setattr(leftovers.Leftovers, "audit", broken)
    result, run = audit_program(LOOP, ["--mistake", "nan-at"])
    assert run.status in (None, 0) and result.passes == 5  # the program was not touched
    internal = [f for f in result.findings if f.check == "internal-error"]
    assert [f.subject for f in internal] == ["observer: zero audit"]
    assert any(f.check == "nonfinite" and f.severity.label == "error" for f in result.findings)


def test_explain_covers_internal_error():
    proc = cli("explain", "internal-error")
    assert proc.returncode == 0 and "rest of the report" in proc.stdout


FAILS_IN_A_PROBE = """
import warp as wp


@wp.kernel
def square(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


class FailsLater:
    calls = 0

    def setup(self, device, fault=None):
        self.x = wp.array([1.0, 2.0], dtype=float, device=device, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)

    def params(self):
        return {"x": self.x}

    def forward(self):
        self.calls += 1
        if self.calls > 2:  # the two passes run; the finite differences' first rollout fails
            raise RuntimeError("the data file vanished")
        self.loss.zero_()
        wp.launch(square, dim=2, inputs=[self.x], outputs=[self.loss])
        return self.loss

    def zero(self, tape):
        pass  # never cleared: accumulation, found by the passes


scenario = FailsLater
"""


def test_a_scenario_error_during_a_probe_keeps_the_passes_findings(tmp_path):
    """The scenario's own forward failing during a probe is the scenario's error (exit 3), not gradcheck's, and
    what the passes found is still reported beside it."""
    path = tmp_path / "fails_later.py"
    path.write_text(FAILS_IN_A_PROBE)
    proc = cli("run", str(path), "--format", "json", "--passes", "2", "--device", "cpu")
    assert proc.returncode == ExitCode.SCENARIO_ERROR, proc.stderr[-2000:]
    (scenario,) = json.loads(proc.stdout)["scenarios"]
    assert "forward (finite differences)() raised RuntimeError" in scenario["error"]
    assert scenario["passes"] == 2 and {f["check"] for f in scenario["findings"]} >= {"accumulation"}
