"""accumulation: a param's gradient must not carry gradient from an earlier iteration.

Two kinds of evidence, one rule (error; a warning when the loss itself changed at fixed params, see
stateful-forward):

- **measured** (every pass started from the same params, as ``gradcheck run`` restores them): pass k's gradient
  must equal pass 1's (bitwise on CPU; within a relative tolerance on CUDA, where float atomics reorder). The shape
  tells what carried it: linear (k× on pass k: nothing cleared the param's gradient), superlinear (cleared params,
  but intermediate gradients pile up and feed back), drift (stale intermediate gradients from custom adjoints or
  atomics leak in), collapse (the gradient vanishes after pass 1: a buffer was consumed or replaced);
- **seen** (any program, the params moving under its optimizer): a backward of a new iteration started with
  gradient an earlier backward left, either in the param's own gradient or in an array that depends on the param
  on this tape, which backward propagates into the param's gradient (gradcheck.observe.leftovers). Several
  backwards at the same params before one update is deliberate accumulation, not this;
- **rows** (no optimizer at all): a gradient read between two differently seeded backwards of one computation,
  which the later one added to (gradcheck.observe.row_reads), and read again: the read is named. The reading code
  taking differences of its reads (gradcheck.observe.differencing) is the running sum on purpose: no finding; code
  that cannot be read: an info, no verdict (a false error is worse than a miss).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gradcheck.model.evidence import Measure, Record
from gradcheck.model.findings import Finding, Severity
from gradcheck.model.known_bugs import GRADS_SEEDS_NOT_ZEROED
from gradcheck.model.paths import family_prefix, family_sizes, group_by_family
from gradcheck.model.trace import CarriedRead, ParamTrace, Trace

NAME = "accumulation"
SUMMARY = "gradients must not change between identical forward/backward passes"

EXPLAIN = """
What it means: a param's gradient carries gradient from an earlier iteration.

Evidence and severity (the same under run, exec and audit()):
- measured: every pass started from the same params (gradcheck run restores them) and pass k's gradient differs
  from pass 1's (bitwise on CPU, within atomics' reordering on CUDA): error;
- seen: a backward of a new iteration (the params moved since the last backward, or a new pass) started with
  gradient an earlier backward left, in the param's own gradient or in an array that depends on the param on this
  tape (backward propagates it into the param): error. Several backwards at the same params before one update
  (deliberate accumulation) are not a new iteration; a leftover the backward leaves bit-identical added nothing.
- a warning instead when the loss itself changed at fixed params (see stateful-forward): different functions
  have different gradients.
- rows: backwards on one computation (the same tape, or the same launches at unmoved params) seeded on different
  outputs or with different seeds (a Jacobian taken row by row), the gradient read after one of them (numpy(),
  wp.copy, a launch that loads it; not an update), still exactly that value when the next backward starts (nothing
  cleared it), changed by that backward, and read again at the same place (a row read in a loop): error, naming
  that read. No verdict (an info) when the reading code's source cannot be read; nothing when it subtracts two reads
  of the gradient (row = g - prev, np.diff, also in a function of the same file the reads are passed to or
  returned from: the running sum on purpose), when the second read is at another place (task 1's gradient logged,
  then the total of both: two quantities to the program), nor for several backwards and one read at the end.

Common causes: tape.zero() never called, or called before backward (Tape.gradients is filled only during
backward, so zeroing a fresh tape clears nothing); only the params zeroed by hand while intermediate
gradients (custom adjoints such as Featherstone's joint_qdd, atomics into reused buffers, retain_grad arrays)
keep theirs; gradients reachable only through an array of structs, which tape.zero() never sees. On Warp before
1.6.0, tape.zero() skipped the arrays seeded with tape.backward(grads=...) (NVIDIA/warp#407), so a loop doing one
backward per output accumulated stale seeds; the finding lists such seeds. In a PyTorch program (gradcheck
exec): optimizer.zero_grad() missing after optimizer.step(), or missing at one accumulation boundary of k
micro-steps (the step is the boundary: backwards between two steps may add up on purpose). Jacobian rows
(tape.backward(grads={y: e_i}) per row on one tape) read without tape.zero() between them: row i holds rows 0..i.

Fix: clear every gradient the tape touched after you read them.

    tape = wp.Tape()
    with tape:
        loss = forward()
    tape.backward(loss)
    grads = [p.grad.numpy().copy() for p in params]   # read (copy: numpy() is a view on CPU)
    tape.zero()                                        # then clear, after reading
"""

LINEAR_RTOL = 0.02  # pass-k coefficient within 2% of k, residual within 2%, counts as linear

_SHAPES = {
    "linear": "grows k× on pass k: the gradient is never cleared between backward calls",
    "superlinear": "grows faster than k× on pass k: intermediate gradients accumulate and feed back into backward",
    "drift": "drifts without a k× pattern: stale intermediate gradients (custom adjoints, atomics into reused buffers) leak into backward",
    "collapse": "drops to zero after pass 1: a gradient buffer was consumed or replaced (e.g. a reused grads= seed)",
}


@dataclass(frozen=True, eq=False)
class MeasuredAccumulation(Record):
    """Pass k's gradient differs from pass 1's at fixed params (``gradcheck run``): the family's worst member's
    norms and their shape; ``affected`` every member. Ranked by how much the last pass grew over the first."""

    stateful_forward: bool
    shape: str
    first_diverging_pass: int | None
    ratio_last_first: float
    norms: tuple[float, ...]
    coefficients: tuple[float, ...]
    affected: tuple[str, ...]
    affected_count: int
    family_size: int
    tolerance: float | None
    uncleared_seeds: tuple[str, ...]
    carriers: tuple[str, ...] | None = None  # the leftovers seen carrying it, when the observer saw them too
    OPTIONAL = frozenset({"carriers"})

    @property
    def subjects(self) -> tuple[str, ...]:
        return self.affected

    @property
    def rank(self) -> Measure | None:
        return Measure.of(self.ratio_last_first, "last/1 ×{:.3g}")


@dataclass(frozen=True, eq=False)
class CarriedAccumulation(Record):
    """A backward of a new iteration started with gradient an earlier one left (any program: ``exec``, ``audit()``,
    and ``run`` when the observer saw it): ``first_iteration`` (also ``iteration``, its name before), the
    ``carriers`` holding the leftover, ``affected`` the family's members."""

    shape: str
    first_iteration: int
    site: str | None
    carriers: tuple[str, ...]
    left_by: int | None
    iterations: tuple[int, ...]
    count: int
    affected: tuple[str, ...]
    stateful_forward: bool
    carried_norm: float  # the leftover's norm when the first such backward started

    @property
    def subjects(self) -> tuple[str, ...]:
        return self.affected

    @property
    def rank(self) -> Measure | None:
        return Measure.of(self.carried_norm, "norm {:.3g}")

    def to_json(self) -> dict:
        json = super().to_json()
        return {"shape": json.pop("shape"), "iteration": self.first_iteration} | json  # exec's key until 0.1


@dataclass(frozen=True, eq=False)
class RowReadAccumulation(Record):
    """A gradient read as the sum of differently seeded backwards of one computation (Jacobian rows read without a
    zero between them): the read, the backwards each read summed (``iterations`` their later ones)."""

    shape: str
    site: str | None
    reader: str
    earlier_reader: str
    backwards: tuple[tuple[int, int], ...]
    count: int
    seeds: str
    carried_norm: float
    read_norm: float
    source_read: bool

    @property
    def rank(self) -> Measure | None:
        return Measure.of(self.carried_norm, "norm {:.3g}")

    def to_json(self) -> dict:
        later = [pair[1] for pair in self.backwards]
        return super().to_json() | {"iteration": later[0] if later else None, "iterations": later}


def check(trace: Trace, options=None) -> tuple[Finding, ...]:
    if any(r.backward_skipped for r in trace.passes):
        return ()  # passes without backward are not comparable; dangling-adjoint reports why they were skipped
    params = [p for p in trace.params if p.is_param]
    sizes = family_sizes(p.name for p in params)
    measured = [p for p in params if trace.fixed_params and len(trace.passes) >= 2 and _first_divergence(p)]
    carried = _carried(trace, {p.subject for p in params})
    by_subject = {p.subject: p for p in params}
    findings = []
    done: set[str] = set()
    for fam, members in group_by_family(measured, key=lambda p: p.name).items():
        worst = max(members, key=_divergence)
        finding = _finding(trace, fam, members, sizes[fam], worst)
        seen = [c for m in members for c in carried.get(m.subject, [])]
        if seen:
            finding = _with_carriers(finding, seen)
        findings.append(finding)
        done |= {m.subject for m in members}
    rest = [s for s in carried if s not in done and s in by_subject]
    for fam, subjects in group_by_family(rest, key=lambda s: by_subject[s].name).items():
        findings.append(_seen_finding(trace, subjects, carried, sizes.get(fam, len(subjects)), fam))
        done |= set(subjects)
    findings.extend(_row_findings(trace, done))
    return tuple(findings)


def _row_findings(trace: Trace, done: set[str]) -> list[Finding]:
    """One finding a gradient read as the sum of differently seeded backwards (gradcheck.observe.row_reads): an
    error; an info when the reading code could not be read (no verdict); nothing when it takes differences of its
    reads (the running sum on purpose)."""
    by_subject: dict[str, list[CarriedRead]] = {}
    for record in trace.passes:
        for read in record.carried_reads:
            if read.subject not in done and read.differenced is not True:
                by_subject.setdefault(read.subject, []).append(read)
    return [_row_finding(trace, subject, reads) for subject, reads in by_subject.items()]


def _row_finding(trace: Trace, subject: str, reads: list[CarriedRead]) -> Finding:
    first = reads[0]
    unread = first.differenced is None
    more = f"; {len(reads) - 1} later read(s) of {subject} too" if len(reads) > 1 else ""
    message = (
        f"{subject} read by {first.reader} after backward #{first.backward} holds backward #{first.earlier}'s "
        f"gradient too: backward #{first.backward} ran on the same computation, {first.seeds}, and added to what "
        f"backward #{first.earlier} left there (norm {first.carried_norm:.4g}), which the program had read in between "
        f"({first.earlier_reader}) and nothing cleared; the value read (norm {first.read_norm:.4g}) is the sum of "
        f"both, not backward #{first.backward}'s alone (Jacobian rows read without a zero between them){more}"
    )
    if unread:
        message += (
            "; the reading code's source could not be read, so whether it takes differences of consecutive reads "
            "(row = g - prev, the running sum on purpose) is unknown: no verdict"
        )
    return Finding(
        check=NAME,
        severity=Severity.INFO if unread else Severity.ERROR,
        subject=subject,
        message=message,
        hint=(
            f"clear the gradient between backwards whose results you read one by one: tape.zero() after reading "
            f"each row (or {subject}.zero_()); to keep the running sum, take differences of consecutive reads"
        ),
        evidence=RowReadAccumulation(
            shape="rows",
            site=first.site,
            reader=first.reader,
            earlier_reader=first.earlier_reader,
            backwards=[(r.earlier, r.backward) for r in reads][:50],
            count=len(reads),
            seeds=first.seeds,
            carried_norm=first.carried_norm,
            read_norm=first.read_norm,
            source_read=not unread,
        ),
    )


def _carried(trace: Trace, params: set[str]) -> dict[str, list]:
    """param subject → [(record, residue)] of the leftovers each later backward added into that param's gradient."""
    found: dict[str, list] = {}
    for record in trace.passes:
        for residue in record.residue:
            if residue.role in ("param", "upstream") and not residue.kept:
                for subject in residue.feeds:
                    if subject in params:
                        found.setdefault(subject, []).append((record, residue))
    return found


def _seen_finding(trace: Trace, subjects: list[str], carried: dict, family_size: int, fam: str) -> Finding:
    subject = subjects[0]
    hits = carried[subject]
    record, residue = hits[0]
    unit = trace.unit
    who = family_prefix(len(subjects), family_size, fam, shown="first")
    where = f" ({record.site})" if record.site else ""
    if residue.role == "param":
        held = f"{subject} still held gradient from {unit} #{residue.left_by} (norm {residue.norm:.4g})"
    else:
        held = (
            f"{residue.subject} still held gradient from {unit} #{residue.left_by} (norm {residue.norm:.4g}), and "
            f"this backward propagates it into {subject}"
        )
    stateful = trace.stateful_forward
    return Finding(
        check=NAME,
        severity=Severity.WARNING if stateful else Severity.ERROR,
        subject=subject,
        message=(
            f"{who}when {unit} #{record.index} started{where}, after the params moved, {held}: the gradient of "
            f"{subject} is the sum of this iteration's and an earlier one's ({len(hits)} of {trace.iterations or len(trace.passes)} "
            f"{trace.units})"
        ),
        hint=residue.fix
        or "zero every gradient the tape reaches between optimizer steps (tape.zero() after reading them, and "
        "the arrays it misses); zero-audit names what was left",
        evidence=CarriedAccumulation(
            shape="carried",
            first_iteration=record.index,
            site=record.site,
            carriers=sorted({r.subject for _rec, r in hits}),
            left_by=residue.left_by,
            iterations=[rec.index for rec, _r in hits][:50],
            count=len(hits),
            affected=subjects,
            stateful_forward=stateful,
            carried_norm=residue.norm,
        ),
    )


def _with_carriers(finding: Finding, seen: list) -> Finding:
    from dataclasses import replace

    carriers = sorted({r.subject for _rec, r in seen})
    shown = ", ".join(carriers[:4]) + (f" and {len(carriers) - 4} more" if len(carriers) > 4 else "")
    return replace(
        finding,
        message=f"{finding.message}; carried by {shown}",
        evidence=finding.evidence.extended(carriers=carriers),
    )


def classify(param: ParamTrace) -> str:
    passes = [p for p in param.passes if p.has_grad]
    first = _first_divergence(param) or 2
    later = passes[first - 1 :]
    if passes[0].norm > 0 and later and all(p.norm == 0 for p in later):
        return "collapse"
    coefs = [p.coef for p in passes]
    if not all(math.isfinite(c) for c in coefs):
        return "drift"
    residuals = [_residual(p, passes[0].norm) for p in passes]
    if all(abs(c - k) <= LINEAR_RTOL * k and r <= LINEAR_RTOL for k, (c, r) in enumerate(zip(coefs, residuals), 1)):
        return "linear"
    increasing = all(b >= a for a, b in zip(coefs, coefs[1:]))
    if increasing and coefs[-1] > (1 + 2 * LINEAR_RTOL) * len(coefs):
        return "superlinear"
    return "drift"


def _finding(trace: Trace, fam: str, members: list[ParamTrace], family_size: int, worst: ParamTrace) -> Finding:
    shape = classify(worst)
    first = _first_divergence(worst)
    norms = worst.norms
    last = norms[-1]
    ratio = last / norms[0] if norms[0] else math.inf
    who = family_prefix(len(members), family_size, fam)
    message = (
        f"{who}from pass {first} on, differs from pass 1; norm {norms[0]:.4g} → {last:.4g} "
        f"(×{ratio:.3g} by pass {len(norms)}); {_SHAPES[shape]}"
    )
    seeds = _uncleared_seeds(trace)
    if seeds:
        shown = ", ".join(seeds[:4]) + (f" and {len(seeds) - 4} more" if len(seeds) > 4 else "")
        message += f"; the zero step left the tape.backward(grads=...) seeds {shown} nonzero (see zero-audit)"
        if GRADS_SEEDS_NOT_ZEROED.affects(trace.warp_version):
            message += f"; {GRADS_SEEDS_NOT_ZEROED.note(trace.warp_version)}"
    stateful = trace.stateful_forward
    if stateful:  # different functions on different passes: their gradients differ too, whatever the zero step
        message += (
            "; the loss itself changed between passes at the same params, so this follows from a stateful forward "
            "(see stateful-forward) and need not mean the zero step is wrong"
        )
    return Finding(
        check=NAME,
        severity=Severity.WARNING if stateful else Severity.ERROR,
        subject=worst.subject,
        message=message,
        hint=(
            "fix the stateful forward first (see stateful-forward); if gradients still differ, clear them after reading"
            if stateful
            else "call tape.zero() after reading gradients, not before backward; zero-audit names what it misses"
        ),
        evidence=MeasuredAccumulation(
            stateful_forward=stateful,
            shape=shape,
            first_diverging_pass=first,
            ratio_last_first=ratio,
            norms=norms,
            coefficients=[p.coef for p in worst.passes],
            affected=[m.subject for m in members],
            affected_count=len(members),
            family_size=family_size,
            tolerance=trace.tolerance,
            uncleared_seeds=seeds,
        ),
    )


def _uncleared_seeds(trace: Trace) -> list[str]:
    """Gradients of arrays seeded with tape.backward(grads=...) that survived a zero step: they feed
    every later backward, the mechanism of NVIDIA/warp#407."""
    return sorted({s.subject for record in trace.passes for s in record.survivors if s.seeded})


def _first_divergence(param: ParamTrace) -> int | None:
    for index, p in enumerate(param.passes[1:], start=2):
        if p.has_grad and not p.equal_to_first:
            return index
    return None


def _divergence(param: ParamTrace) -> float:
    base = param.passes[0].norm or 1e-30
    values = [p.diff_norm / base for p in param.passes[1:] if p.has_grad]
    finite = [v for v in values if math.isfinite(v)]
    return max(finite) if finite else math.inf


def _residual(p, first_norm: float) -> float:
    """Share of pass k's gradient not explained by a multiple of pass 1's."""
    if p.norm == 0:
        return 0.0
    along = p.coef * first_norm
    return math.sqrt(max(p.norm * p.norm - along * along, 0.0)) / p.norm
