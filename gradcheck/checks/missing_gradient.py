"""missing-gradient: a param whose gradient is absent, or exactly zero on every pass.

Exactly zero is the signature of a broken graph, not of a small gradient: the array was not read
under the tape, it was replaced after the tape recorded it, or it was created inside the tape
(Newton's ``Model.state()``/``control()`` copy model arrays with a taped ``wp.copy``, and the
gradient lands in ``model.joint_q.grad`` instead).

Severity follows the evidence that the array is a parameter (gradcheck.observe.params): declared by the program
or updated from its gradient → error. A leaf nothing updates (requires grad, read by the tape) with a zero
gradient is usually a model constant: one info listing them, and only when the program showed no parameter at
all (then they may be the params it updates on the host). A leaf the recorded dataflow does connect to the loss
(or to the outputs a ``tape.backward(grads=...)`` seeded) is not "a constant the loss does not depend on": the
chain-break walk names the launch that passes it nothing, and the leaf gets that explanation of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from gradcheck.model.evidence import ChainBreak, Mark, Record
from gradcheck.model.findings import Finding, Severity
from gradcheck.model.paths import family_prefix, family_sizes, group_by_family
from gradcheck.model.seeded import root_words
from gradcheck.model.trace import ParamTrace, Trace

NAME = "missing-gradient"
SUMMARY = "every param must have a gradient buffer that is nonzero on some pass"

EXPLAIN = """
What it means: a param has no .grad buffer, or its gradient is exactly zero on every pass backward ran.

Evidence and severity: a param is an array the program declared (a scenario's params(), audit(params=...)) or
one it updates from its gradient (a launch taking x and x.grad that writes x, e.g. an SGD or Adam step): a zero
or absent gradient there is an error, whether or not any tape reads the array (one read only by a launch made
before the tape is caught this way). A leaf (requires grad, read by the tape, updated by nothing seen) with a
zero gradient is usually a model constant: one info lists them, only when the program showed no param at all.
A leaf whose values do reach the loss (or, for tape.backward(grads={y: seed}), the seeded output y) is no such
constant: its own info names the launch that passes it nothing (kernel, file:line); a warning when that launch's
kernel holds a construct the running Warp differentiates wrongly (a loop with a run-time trip count carrying a
value) and the program updates nothing (a one-shot gradient or Jacobian: the gradient is its result).

Common causes: the array was created without requires_grad=True; it is not read under the tape; Newton states
or controls created inside the tape (Model.state()/control() copy model arrays with a taped wp.copy and the
gradient lands in model.joint_q.grad); a struct field whose requires_grad changed after assignment
(see stale-adjoint).

Where it breaks: gradcheck walks the recorded dataflow from the param toward the loss and names the first link
backward cannot cross, with the array and the launch there: no launch reads the param; it is read only by a
launch made before or outside `with tape:`; a kernel built with enable_backward=False; an intermediate allocated
with requires_grad=False; a host round trip (.numpy() and back into a new wp.array); a wp.copy Warp did not
record (it records one only while a tape records and both arrays have a gradient); a builtin without an adjoint
(wp.floor, wp.round, wp.sign, int casts); a newer array of the param's name that the tape reads instead (states
allocated again inside the tape); a launch whose derivative is zero at these values (a saturated clamp), or
whose kernel holds a construct the running Warp differentiates wrongly (a value carried through a loop whose trip
count is known only at run time), named with its file:line.
`--graph FILE` draws the dataflow with the break marked.

In a PyTorch program (gradcheck exec): a tensor an optimizer holds whose .grad stays None or zero is an error
(a warning when the loss's autograd graph reaches it and the gradient is exactly zero: the derivative itself may
be zero, as for a bias a batch norm cancels),
one that nothing trains (requires grad, in no optimizer: a frozen or unused part of a model) one info; the cause
named is the loss's autograd graph never reaching it (used under torch.no_grad(), through .detach() or .data,
or not at all; a warning when the forward read it only through .data or .numpy(): a mask or an index kept as a
Parameter on purpose cannot be told from a lost gradient), the tensor handed to Warp as an array without gradient
(wp.from_torch(x.detach())), or Warp writing its gradient into a buffer zero_grad() replaced (see torch-bridge).
A tensor whose .grad the program sets itself before the optimizer steps is not missing: nothing is said; nor is a
parameter of a DistributedDataParallel model made with find_unused_parameters=True that the loss does not reach.

Fix: allocate with requires_grad=True and create states and controls before the tape.

    states = [model.state() for _ in range(steps + 1)]   # outside the tape
    tape = wp.Tape()
    with tape:
        for i in range(steps):
            solver.step(states[i], states[i + 1], controls[i], None, dt)
"""

_NO_BUFFER = "no-buffer"
_ALL_ZERO = "all-zero"


def _marks(param: str, found) -> tuple[Mark, ...]:
    """The chain break as ``--graph`` marks it (``found``: the ``break`` evidence)."""
    if not found:
        return ()
    return (ChainBreak(param, found.get("cause") or "break", found.get("array"), found.get("launch"),
                       found.get("index"), tuple(found.get("path") or ())),)  # fmt: skip


@dataclass(frozen=True, eq=False)
class MissingParamGradient(Record):
    """A param family's gradient is missing (``kind``: no-buffer or all-zero): its members (``params`` by name,
    ``affected`` as subjects), its role, and where its chain to the loss breaks when that was found (``break``)."""

    kind: str
    params: tuple[str, ...]
    affected: tuple[str, ...]
    param_count: int
    family_size: int
    role: str | None
    chain_break: dict | None = None
    OPTIONAL = frozenset({"chain_break"})
    KEYS = {"chain_break": "break"}

    @property
    def subjects(self) -> tuple[str, ...]:
        return self.affected

    @property
    def marks(self) -> tuple[Mark, ...]:
        return _marks(self.params[0] if self.params else "", self.chain_break)


@dataclass(frozen=True, eq=False)
class MissingLeafGradient(Record):
    """Leaves (arrays that require grad, nothing updates) with no or an all-zero gradient, listed in one info
    (``subjects``), or one leaf whose values reach the loss with the break that explains it; ``iteration`` and
    ``site``: the first backward they took part in."""

    kind: str
    leaves: tuple[str, ...]
    role: str | None
    iteration: int | None
    site: str | None
    chain_break: dict | None = None
    OPTIONAL = frozenset({"chain_break"})
    KEYS = {"leaves": "subjects", "chain_break": "break"}

    @property
    def subjects(self) -> tuple[str, ...]:
        return self.leaves

    @property
    def marks(self) -> tuple[Mark, ...]:
        return _marks(self.leaves[0].removesuffix(".grad") if self.leaves else "", self.chain_break)


def _first_backward(trace: Trace) -> tuple[int | None, str | None]:
    ran = [r for r in trace.passes if not r.backward_skipped] or list(trace.passes)
    return (ran[0].index, ran[0].site) if ran else (None, None)


def check(trace: Trace, options=None) -> tuple[Finding, ...]:
    skipped = {r.index for r in trace.passes if r.backward_skipped}
    ran = [r.index for r in trace.passes if not r.backward_skipped]
    if not ran:
        return ()  # backward never ran (dangling-adjoint says why): absent gradients prove nothing
    params = [p for p in trace.params if p.is_param]
    kinds = {p.name: _kind(p, skipped) for p in trace.params}
    sizes = family_sizes(p.name for p in params)
    findings = []
    supplied = {name for name, found in _breaks(trace).items() if found.cause in _NOT_MISSING}
    for kind in (_NO_BUFFER, _ALL_ZERO):
        missing = [p for p in params if kinds[p.name] == kind and p.name not in supplied]
        for fam, members in group_by_family(missing, key=lambda p: p.name).items():
            findings.append(_finding(trace, kind, fam, members, sizes[fam], ran))
    leaves = [p for p in trace.params if not p.is_param]
    if not params:
        findings.extend(_leaves(trace, [p for p in leaves if kinds[p.name] == _ALL_ZERO]))
    findings.extend(_unreached(trace, [p for p in leaves if kinds[p.name] == _NO_BUFFER]))
    return tuple(findings)


def _kind(param: ParamTrace, skipped: set[int]) -> str | None:
    passes = [p for p in param.passes if p.index not in skipped]
    if not passes:
        return None
    with_grad = [p for p in passes if p.has_grad]
    if not with_grad:  # a torch tensor's .grad may be None after some backwards and set after others (zero_grad)
        return _NO_BUFFER
    if all(p.nonzero == 0 for p in with_grad) and (param.peak is None or param.peak.norm == 0):
        return _ALL_ZERO  # NaN counts as nonzero: an all-NaN gradient is nonfinite, not missing
    return None


def _leaves(trace: Trace, zero: list[ParamTrace]) -> list[Finding]:
    """The leaves with an all-zero gradient, in a program that showed no parameter: those the recorded dataflow
    connects to the loss (or seeded output) each explained by their break; the others in one info."""
    breaks = _breaks(trace)
    root = _root(trace)
    reached = [p for p in zero if p.name in breaks and breaks[p.name].cause not in _NOT_REACHED]
    findings = [_reached_leaf(trace, p, breaks[p.name], root) for p in reached]
    return findings + _leaf_info(
        trace,
        [p for p in zero if p not in reached],
        _ALL_ZERO,
        lambda n, shown: (
            f"{n} leaf array(s) that require grad have a gradient of exactly zero after every "
            f"{trace.unit} they took part in: {shown}; {root} does not depend on them (often model constants), "
            "and no launch was seen updating any array from its gradient"
        ),
        f"nothing, if they are not meant to be learned; else check the launches between them and {root}",
    )


# chain breaks that say the values never reach the loss: there "the loss does not depend on them" is the answer
_NOT_REACHED = ("dead-end", "never-read", "replaced")


def _root(trace: Trace) -> str:
    """What the gradients flow back from: the loss, or (every backward seeded with grads=) the seeded outputs."""
    ran = [r for r in trace.passes if not r.backward_skipped]
    if not ran or any(r.loss is not None or r.seeded is None for r in ran):
        return "the loss"
    return root_words(name for r in ran for name in r.seeded.outputs)


def _reached_leaf(trace: Trace, leaf: ParamTrace, cause, root: str) -> Finding:
    """A leaf whose values reach the loss (or seeded output) though its gradient is zero: the break is the answer.
    A warning when the launch's kernel holds a construct Warp differentiates wrongly (wrong-adjoint), since the
    program updates nothing and its gradient is the result; else an info (the derivative may truly be zero)."""
    lead = "every link to " + root + " is on the tape, but" if cause.cause in _ADJOINT_CAUSES else "the chain breaks:"
    return Finding(
        check=NAME,
        severity=Severity.WARNING if cause.cause == "wrong-adjoint" else Severity.INFO,
        subject=leaf.subject,
        message=f"{leaf.subject} (a leaf nothing updates) is exactly zero after every {trace.unit} it took part in, "
        f"though its values reach {root}; {lead} {cause.detail}",
        hint=cause.fix,
        evidence=MissingLeafGradient(
            _ALL_ZERO, [leaf.subject], leaf.role, *_first_backward(trace), chain_break=_break_evidence(cause)
        ),
    )


def _unreached(trace: Trace, absent: list[ParamTrace]) -> list[Finding]:
    """One info for the leaves whose ``.grad`` stayed None (a torch tensor that requires grad, held by no
    optimizer, that no backward reached: a frozen or unused part of a model). A Warp leaf always has a buffer."""
    return _leaf_info(
        trace,
        absent,
        _NO_BUFFER,
        lambda n, shown: (
            f"{n} tensor(s) that require grad got no gradient (.grad None after every {trace.unit}): "
            f"{shown}; no optimizer holds them, so nothing seen trains them (a frozen or unused part of the model?)"
        ),
        "nothing, if they are not meant to be learned (then requires_grad=False saves the work); else use them in "
        "the loss's computation and give them to the optimizer",
    )


def _leaf_info(trace: Trace, leaves: list[ParamTrace], kind: str, message, hint: str) -> list[Finding]:
    """One info listing ``leaves`` (the first five by name); ``message(count, shown)``."""
    if not leaves:
        return []
    subjects = [p.subject for p in leaves]
    shown = ", ".join(subjects[:5]) + (f" and {len(subjects) - 5} more" if len(subjects) > 5 else "")
    return [
        Finding(
            check=NAME,
            severity=Severity.INFO,
            subject=subjects[0],
            message=message(len(subjects), shown),
            hint=hint,
            evidence=MissingLeafGradient(kind, subjects, "leaf", *_first_backward(trace)),
        )
    ]


# causes a missing torch gradient can have: said even when .grad is None (a Warp param without a buffer has one)
_TORCH_CAUSES = ("detached", "unreached", "orphaned", "zero-derivative", "read-through-alias")
# an exactly-zero torch gradient the autograd graph does reach: the derivative may truly be zero (a bias batch
# norm cancels, a WGAN critic's last bias): worth a look, not proof of a broken graph
_WARNING_CAUSES = ("zero-derivative", "read-through-alias")
# a torch tensor backward leaves without .grad whose .grad the program sets before the optimizer steps: not missing
_SUPPLIED = "supplied"
# ... or a DDP parameter never reached under find_unused_parameters=True: the program declared it may go unused
_NOT_MISSING = (_SUPPLIED, "declared-unused")
# chain breaks with every link on the tape: the launch's own adjoint passes nothing
_ADJOINT_CAUSES = ("zero-adjoint", "wrong-adjoint")


def _newton(trace: Trace) -> bool:
    """Newton's states and controls are the usual way to get an all-zero gradient in a Newton program."""
    return any(p.subject.startswith(("states[", "controls[", "state.", "control.", "model.")) for p in trace.params)


def _breaks(trace: Trace) -> dict:
    """param key → where its chain to the loss breaks (the first backward that looked)."""
    found: dict = {}
    for record in trace.passes:
        for found_break in record.breaks:
            if found_break.cause == _SUPPLIED:  # whatever broke, the program gave the optimizer a gradient
                found[found_break.param] = found_break
            else:
                found.setdefault(found_break.param, found_break)
    return found


def _finding(trace: Trace, kind: str, fam: str, members: list[ParamTrace], family_size: int, ran: list[int]) -> Finding:
    first = members[0]
    who = family_prefix(len(members), family_size, fam, shown="")
    breaks = _breaks(trace)
    cause = next((breaks[m.name] for m in members if m.name in breaks), None)
    if kind == _NO_BUFFER:
        message = f"{who}no gradient buffer (.grad is None)"
        hint = "allocate the array with requires_grad=True before building anything that uses it"
    else:
        message = f"{who}gradient is exactly zero on every {trace.unit} that ran ({len(ran)})"
        hint = "read the array under the tape, after it got its final .grad; see stale-adjoint findings"
        if _newton(trace):
            hint += "; create Newton states/controls outside the tape (Model.state() inside it sends the gradient to model.joint_q.grad)"
    severity = Severity.WARNING if cause is not None and cause.cause in _WARNING_CAUSES else Severity.ERROR
    if cause is not None and kind == _NO_BUFFER and cause.cause in _TORCH_CAUSES:
        message = f"{who}no gradient (.grad is None after every {trace.unit} that ran, {len(ran)}); {cause.detail}"
        hint = cause.fix
    elif cause is not None and cause.cause in _WARNING_CAUSES:
        message = f"{who}gradient is exactly zero on every {trace.unit} that ran ({len(ran)}); {cause.detail}"
        hint = cause.fix
    elif cause is not None and kind != _NO_BUFFER:
        root = _root(trace)
        lead = (
            f"every link to {root} is on the tape, but"
            if cause.cause in _ADJOINT_CAUSES
            else f"the chain to {root} breaks:"
        )
        message += f"; {lead} {cause.detail}"
        hint = cause.fix
        others = [k for k in trace.no_backward_kernels if cause.cause != "no-backward"]
        if others:  # what the walk could not place still deserves a word
            message += f"; the tape also holds kernels built with enable_backward=False ({', '.join(others[:4])})"
    elif trace.no_backward_kernels:
        shown = ", ".join(trace.no_backward_kernels[:4]) + (" …" if len(trace.no_backward_kernels) > 4 else "")
        message += (
            f"; the tape holds kernels built with enable_backward=False ({shown}): no gradient flows through them"
        )
        hint = "build the kernels on the gradient's path with enable_backward=True (the default), or " + hint
    return Finding(
        check=NAME,
        severity=severity,
        subject=first.subject,
        message=message,
        hint=hint,
        evidence=MissingParamGradient(
            kind=kind,
            params=[m.name for m in members],
            affected=[m.subject for m in members],
            param_count=len(members),
            family_size=family_size,
            role=first.role,
            chain_break=_break_evidence(cause) if cause is not None else None,
        ),
    )


def _break_evidence(cause) -> dict:
    return {
        "cause": cause.cause,
        "array": cause.array,
        "launch": cause.launch,
        "index": cause.index,
        "path": list(cause.path),
    }
