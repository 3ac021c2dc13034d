"""``gradcheck.audit()``: the observer of ``gradcheck exec`` around code in this process (a notebook, a test).

    import gradcheck

    with gradcheck.audit() as audit:
        train(steps=200)            # any Warp code: tapes, launches, optimizers, Newton solvers
    print(audit.report)             # the same findings `gradcheck exec train.py` gives
    assert audit.exit_code == 0     # or gradcheck.testing.assert_audit_healthy(audit)

The same observer, checks and severities as ``gradcheck exec`` and ``gradcheck run``; an iteration is one backward.
``params={"w": w}`` declares what is learned (judged as a scenario's ``params()`` are); otherwise a param is an
array the code updates from its gradient. A backward that would write through a dangling struct pointer raises
``gradcheck.observe.DanglingAdjointStop`` into the code before it runs (``keep_going=True`` skips it instead).
Each kernel's adjoint is tested on the values of its first launch, as under ``exec`` (``adjoint_test=False``: not).
The report is built when the block ends, also when it raises (the exception goes on).
"""

from __future__ import annotations

from gradcheck.model.options import DEFAULT_CHECKS, CheckOptions, severity
from gradcheck.model.report import Report


class Audit:
    def __init__(self, params: dict | None = None, max_norm: float | None = None, keep_going: bool = False,
                 fail_on: str = "error", adjoint_test: bool = True):  # fmt: skip
        self.checks = CheckOptions(max_norm=max_norm) if max_norm is not None else DEFAULT_CHECKS
        self.fail_on = severity(fail_on, "fail_on")
        self._params, self._keep_going, self._adjoint_test = params, keep_going, adjoint_test
        self._audit = None
        self.report: Report | None = None

    def __enter__(self) -> Audit:
        from gradcheck.engine.program_audit import ProgramAudit, stack_roots

        self._audit = ProgramAudit(
            stack_roots, params=self._params, stop_on_dangling=not self._keep_going, adjoint_test=self._adjoint_test,
            checks=self.checks,  # the observer looks for an explosion's origin at the norm the check judges
        )  # fmt: skip
        self._audit.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        from gradcheck.engine.environment import describe

        self._audit.__exit__(exc_type, exc, tb)
        result = self._audit.result(self.checks, spec="audit", name="gradcheck.audit()")
        self.report = Report(environment=describe(result.device), scenarios=(result,), fail_on=self.fail_on)
        return False

    @property
    def result(self):
        return self.report.scenarios[0] if self.report is not None else None

    @property
    def findings(self) -> tuple:
        return self.result.findings if self.report is not None else ()

    @property
    def exit_code(self) -> int:
        return int(self.report.exit_code) if self.report is not None else 0


def audit(params: dict | None = None, max_norm: float | None = None, keep_going: bool = False,
          fail_on: str = "error", adjoint_test: bool = True) -> Audit:  # fmt: skip
    """A context manager auditing every Warp backward inside it (see the module docstring). ``adjoint_test=False``
    turns off the test of each kernel's adjoint on its first launch (``exec --no-adjoint-test``)."""
    return Audit(params=params, max_norm=max_norm, keep_going=keep_going, fail_on=fail_on, adjoint_test=adjoint_test)
