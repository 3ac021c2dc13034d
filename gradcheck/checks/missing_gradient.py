"""missing-gradient: a param whose gradient is absent, or exactly zero on every pass.

Exactly zero is the signature of a broken graph, not of a small gradient: the array was not read
under the tape, it was replaced after the tape recorded it, or it was created inside the tape
(Newton's ``Model.state()``/``control()`` copy model arrays with a taped ``wp.copy``, and the
gradient lands in ``model.joint_q.grad`` instead).
"""

from __future__ import annotations

from gradcheck.model.findings import Finding, Severity
from gradcheck.model.paths import family_prefix, family_sizes, group_by_family
from gradcheck.model.trace import ParamTrace, Trace

NAME = "missing-gradient"
SUMMARY = "every param must have a gradient buffer that is nonzero on some pass"

EXPLAIN = """
What it means: a param has no .grad buffer, or its gradient is exactly zero on every pass backward ran.

Common causes: the array was created without requires_grad=True; it is not read under the tape; Newton states
or controls created inside the tape (Model.state()/control() copy model arrays with a taped wp.copy and the
gradient lands in model.joint_q.grad); a struct field whose requires_grad changed after assignment
(see stale-adjoint).

Fix: allocate with requires_grad=True and create states and controls before the tape.

    states = [model.state() for _ in range(steps + 1)]   # outside the tape
    tape = wp.Tape()
    with tape:
        for i in range(steps):
            solver.step(states[i], states[i + 1], controls[i], None, dt)
"""

_NO_BUFFER = "no-buffer"
_ALL_ZERO = "all-zero"


def check(trace: Trace, options=None) -> tuple[Finding, ...]:
    ran = [i for i, r in enumerate(trace.passes) if not r.backward_skipped]
    if not ran:
        return ()  # backward never ran (dangling-adjoint says why): absent gradients prove nothing
    kinds = {p.name: _kind(p, ran) for p in trace.params}
    sizes = family_sizes(p.name for p in trace.params)
    findings = []
    for kind in (_NO_BUFFER, _ALL_ZERO):
        missing = [p for p in trace.params if kinds[p.name] == kind]
        for fam, members in group_by_family(missing, key=lambda p: p.name).items():
            findings.append(_finding(trace, kind, fam, members, sizes[fam], ran))
    return tuple(findings)


def _kind(param: ParamTrace, ran: list[int]) -> str | None:
    passes = [param.passes[i] for i in ran if i < len(param.passes)]
    if any(not p.has_grad for p in passes):
        return _NO_BUFFER
    if all(p.nonzero == 0 for p in passes):  # NaN counts as nonzero: an all-NaN gradient is nonfinite, not missing
        return _ALL_ZERO
    return None


def _newton(trace: Trace) -> bool:
    """Newton's states and controls are the usual way to get an all-zero gradient in a Newton program."""
    return any(p.subject.startswith(("states[", "controls[", "state.", "control.", "model.")) for p in trace.params)


def _finding(trace: Trace, kind: str, fam: str, members: list[ParamTrace], family_size: int, ran: list[int]) -> Finding:
    first = members[0]
    who = family_prefix(len(members), family_size, fam, shown="")
    if kind == _NO_BUFFER:
        message = f"{who}no gradient buffer (.grad is None)"
        hint = "allocate the array with requires_grad=True before building anything that uses it"
    else:
        message = f"{who}gradient is exactly zero on every pass backward ran ({len(ran)})"
        hint = "read the array under the tape, after it got its final .grad; see stale-adjoint findings"
        if _newton(trace):
            hint += "; create Newton states/controls outside the tape (Model.state() inside it sends the gradient to model.joint_q.grad)"
    if trace.no_backward_kernels:
        shown = ", ".join(trace.no_backward_kernels[:4]) + (" …" if len(trace.no_backward_kernels) > 4 else "")
        message += (
            f"; the tape holds kernels built with enable_backward=False ({shown}): no gradient flows through them"
        )
        hint = "build the kernels on the gradient's path with enable_backward=True (the default), or " + hint
    return Finding(
        check=NAME,
        severity=Severity.ERROR,
        subject=first.subject,
        message=message,
        hint=hint,
        evidence={
            "kind": kind,
            "params": [m.name for m in members],
            "affected": [m.subject for m in members],
            "param_count": len(members),
            "family_size": family_size,
        },
    )
