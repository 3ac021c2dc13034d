"""What a driver observed, pass by pass (a program's backward by backward under exec): the only input the checks see.

Plain frozen data (no Warp objects), so checks are pure functions that tests can feed by hand
and a report can outlive the arrays it describes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from gradcheck.model.growth import GrowthRun
from gradcheck.model.seeded import SeededBackward


@dataclass(frozen=True)
class ParamPass:
    """One parameter's gradient as read right after backward on one pass."""

    has_grad: bool  # False: the array has no .grad buffer (requires_grad=False)
    norm: float  # L2 norm over the finite values, accumulated in float64
    max_abs: float  # over the finite values
    nonzero: int
    nonfinite: int  # NaN + Inf values
    equal_to_first: bool  # same as pass 1 (bitwise on CPU, within `Trace.tolerance` on CUDA)
    diff_norm: float  # ||g_k - g_1||
    coef: float  # <g_k, g_1> / <g_1, g_1>: k on pass k for linear accumulation; nan if g_1 is 0
    nan: int = 0
    inf: int = 0
    checksum: int = 0  # bit-exact, right after backward
    readout_norm: float | None = None  # after after_backward(): what the user's loop reads (None: no after_backward)
    readout_checksum: int | None = None
    clipped_norm: float | None = None  # after gradcheck's own --clip-norm step
    index: int = 0  # the PassRecord (pass, or backward) this was read after


# How an array came to be judged as a parameter: evidence, not the command that ran the program.
DECLARED = "declared"  # the program said so: a scenario's params(), gradcheck.audit(params=...)
UPDATED = "updated"  # the program used its gradient to update it (a launch that takes x.grad and writes x)
LEAF = "leaf"  # requires grad and is read by the tape, but nothing seen updates it: perhaps a constant


@dataclass(frozen=True)
class NormSample:
    """One point of a gradient's history: which backward, its norm, and the loss of that backward."""

    backward: int
    norm: float
    loss: float | None


@dataclass(frozen=True)
class ParamTrace:
    name: str  # key in the scenario's params(), or the path the program keeps the array at
    subject: str  # path of its gradient as the user's code spells it, e.g. "states[0].joint_q.grad"
    shape: tuple
    dtype: str
    passes: tuple[ParamPass, ...]  # one per kept PassRecord it was measured on, in order
    value_norm: float = float("nan")  # L2 norm of the param's values (restored to these every pass)
    role: str = DECLARED  # DECLARED | UPDATED | LEAF
    # a bounded sample of the whole history (long runs keep the first, the last and every 2^k-th point)
    history: tuple[NormSample, ...] = ()
    peak: NormSample | None = None  # the largest finite norm on any backward
    measured: int = 0  # backwards it was measured after (≥ len(passes) when a long run dropped records)
    growth: GrowthRun | None = None  # its loss and gradient growing together at the end of a training run
    # the value norm when the trace was taken (the program's end): a program that moved the param trains it
    final_value_norm: float = float("nan")

    @property
    def norms(self) -> tuple[float, ...]:
        return tuple(p.norm for p in self.passes)

    @property
    def is_param(self) -> bool:
        return self.role != LEAF


@dataclass(frozen=True)
class Survivor:
    """A gradient buffer still nonzero after the scenario's zero step."""

    subject: str
    # "kernel argument", "struct field", "nested struct field", "array of structs", "tape.gradients", "param"
    reached_via: str
    norm: float
    nonzero: int  # scalar values (a vec3 element counts 3)
    size: int  # scalar values
    aliases: tuple[str, ...] = ()
    seeded: bool = False  # the .grad of an array the scenario passed to tape.backward(grads=...)


@dataclass(frozen=True)
class PointerIssue:
    """A struct mirror or array-of-structs record whose pointer disagrees with the live array.

    Found before backward. ``stale-adjoint`` issues send gradients to the wrong buffer;
    ``dangling-adjoint`` issues would make backward write into memory no array owns any more.
    """

    check: str  # "stale-adjoint" | "dangling-adjoint"
    kind: str  # orphan-grad | replaced-grad | null-grad | stale-data | nested-copy | freed | reused | unknown
    subject: str  # "model.geo.scale.grad", "parts[0].weight.grad"
    mirror: int  # pointer held by the mirror / record
    live: int  # pointer the live array holds (0: none)
    in_tape: bool  # the struct is an argument of a launch on this pass's tape
    owner: str | None = None  # array that owns the mirror's memory now (orphan buffer, unrelated array)
    source: str | None = None  # nested-copy: the instance the copy was taken from
    orphan_norm: float | None = None  # norm of the buffer backward really writes, read after the zero step
    detail: str = ""
    container: str = "struct"  # "struct" (an instance's ctypes mirror) | "array of structs" (raw records)


@dataclass(frozen=True)
class Residue:
    """Gradient an earlier backward left in a buffer, still there when a backward of a later iteration starts.

    Recorded only across an iteration boundary (the params moved since, or the driver started a new pass): several
    backwards at the same params before one update is deliberate accumulation, not residue."""

    subject: str  # the gradient buffer
    norm: float
    nonzero: int
    role: str  # "param": a param's own gradient | "upstream": this backward propagates it into params | "other"
    feeds: tuple[str, ...]  # the params' gradients this backward adds it into (its own, for a param)
    left_by: int  # the backward that left it
    kept: bool  # this backward left the buffer bit-identical (refilled or untouched): nothing was added
    fix: str | None = None  # the driver's own words for the zero step (a torch program: optimizer.zero_grad())


@dataclass(frozen=True)
class CarriedRead:
    """A gradient read after a backward that added to what an earlier backward of the same computation had left
    there: the program read that earlier value in between, nothing cleared it, and the later backward, seeded on
    another output or with another seed, added to it. The value read is the sum of both backwards (Jacobian rows
    taken without a zero between them: [2,0,0], [2,4,0], [2,4,6] instead of the rows of diag(2,4,6))."""

    subject: str  # the gradient buffer ("x.grad")
    reader: str  # what read the sum: "host read (rows.py:21)", "launch copy_row (rows.py:30)"
    site: str | None  # file:line of that read
    earlier_reader: str  # what read the earlier backward's value, in between
    earlier: int  # the backward whose gradient was still there (its number among the program's backwards)
    backward: int  # the backward that added to it
    seeds: str  # how the two backwards were seeded differently, in words
    carried_norm: float  # what the earlier backward(s) left, and the program read
    read_norm: float  # what was read after the later backward
    # the reading code takes differences of consecutive reads (row = g - prev): the running sum is deliberate;
    # None: its source could not be read
    differenced: bool | None = False


@dataclass(frozen=True)
class GradientRewrite:
    """A param's gradient rewritten by the update that consumed it, then read: the read saw another gradient."""

    subject: str
    writer: str  # the launch that updated the param and rewrote its gradient, with its call site
    reader: str  # what read the gradient afterwards
    produced_norm: float  # what backward left
    read_norm: float  # what the reader saw


@dataclass(frozen=True)
class ClearedGradient:
    """A param's gradient cleared between the backward that produced it (finite, nonzero) and the update that
    consumed it: the update read all zeros (gradcheck.observe.gradient_use). A clip or a projection is not zero."""

    subject: str  # the gradient ("x.grad")
    clearer: str | None  # the zero step seen ("tape.zero() at t.py:40"); None: unseen (x.grad.zero_(), fill_(0))
    update: str  # the update launch that read the zeros, with its call site ("launch sgd (train.py:42)")
    produced_norm: float  # what backward had left there


@dataclass(frozen=True)
class BridgeIssue:
    """A mistake at the torch<->Warp bridge (gradcheck.pytorch.bridge), judged by checks.torch_bridge."""

    kind: str  # "doubled-gradient" | "orphaned-alias" | "tape-reused" | "grad-output-written" | "saved-overwritten"
    subject: str  # the torch tensor's gradient ("model.scale.grad"), or "Fn.backward grad_output"
    site: str | None  # file:line of the wp.from_torch / wp.to_torch call, or of the Function's backward
    detail: str  # what happened, in one sentence
    fix: str
    backward: int  # the torch backward it was seen in
    shared: bool = False  # grad-output-written: another node read the tensor after the write


@dataclass(frozen=True)
class RankDivergence:
    """What differs across the ranks of a DistributedDataParallel job at one audited step (gradcheck.pytorch.ranks),
    judged by checks.cross_rank."""

    kind: str  # "gradient-diverged" | "gradient-missing" | "parameter-diverged" | "bucket-detached"
    subject: str  # "model.inp.weight.grad", or the parameter for parameter-diverged
    backward: int  # the audited torch backward whose step it was seen at
    ranks: tuple[int, ...]  # the ranks that differ from the others (all of them when no two agree)
    world_size: int
    detail: str  # what differs and where it came from, in one sentence or two
    fix: str
    site: str | None = None  # the write named as the cause (a wp.from_torch call), when one is known
    spread: float = 0.0  # largest relative difference between the ranks' fingerprints


@dataclass(frozen=True)
class InternalError:
    """A check, probe or observer part of gradcheck's own that raised: a finding, never at the cost of the others."""

    component: str  # "check accumulation", "observer: zero audit", "probe finite differences"
    error: str  # "ValueError: ..."
    traceback: str = ""

    @classmethod
    def of(cls, component: str, exc: BaseException) -> InternalError:
        import traceback

        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        return cls(component, f"{type(exc).__name__}: {exc}", text)


@dataclass(frozen=True)
class PassRecord:
    """One iteration: a pass of ``gradcheck run``, or one backward of a program under ``gradcheck exec``."""

    index: int  # 1-based: the pass, or the backward (its number among all the program's backwards)
    loss: float | None
    launches: int
    audited_buffers: int  # gradient buffers the zero audit looked at
    survivors: tuple[Survivor, ...]
    seconds: float = 0.0  # wall time of the whole pass, audits included (device synchronised)
    pointer_issues: tuple[PointerIssue, ...] = ()
    backward_skipped: str | None = None  # why backward was not launched on this pass
    clip_total: tuple[float, float] | None = None  # --clip-norm: global norm (before, after)
    kept_by_backward: tuple[str, ...] = ()  # the last pass's survivors this pass's backward left bit-identical
    site: str | None = None  # file:line of the tape.backward call
    residue: tuple[Residue, ...] = ()  # leftovers of an earlier iteration when this backward started
    rewrites: tuple[GradientRewrite, ...] = ()  # gradients rewritten by their update and read afterwards
    cleared: tuple[ClearedGradient, ...] = ()  # gradients cleared after backward, then read by their update
    changed: tuple[ChangedInput, ...] = ()  # arrays the tape read that changed before this backward
    hazards: tuple[Rewrite, ...] = ()  # write-after-read while this iteration's tape recorded
    identical: tuple[Rewrite, ...] = ()  # rewrites with the very values the reader saw (harmless)
    zero_step: str | None = None  # what cleared the gradients afterwards ("tape.zero() at train.py:40"); None: nothing
    breaks: tuple[ChainBreak, ...] = ()  # where the chain to the loss breaks, for params with a zero gradient
    # where a NaN/Inf ("nonfinite") or a norm past --max-norm ("growth") started in this backward: (kind, origin),
    # origin a gradcheck.diagnose.backward_origin.BackwardOrigin (labels and numbers only)
    origins: tuple = ()
    carried_reads: tuple[CarriedRead, ...] = ()  # gradients read after a backward added to an earlier one's, unzeroed
    seeded: SeededBackward | None = None  # a backward seeded with grads= (no scalar loss): its outputs and seeds


@dataclass(frozen=True)
class LaunchVerdict:
    """The per-launch adjoint test of one tape entry (gradcheck.rerun.launch_check)."""

    index: int  # position on the tape
    kernel: str
    where: str | None  # file:line of the wp.launch call
    # "ok" | "mismatch" | "assigns" | "split" (fails alone, passes with its consumers) | "no-verdict" | "not-checked"
    # (note: why) | "no-backward" (an enable_backward=False kernel on the gradient path)
    status: str
    rel_error: float = 0.0
    ad: float = 0.0  # <J^T w, u> from the launch's adjoint
    fd: float = 0.0  # <w, dF/du> from central differences of the launch
    rollouts: int = 0
    note: str | None = None
    # constructs in the kernel Warp mishandles: (KnownBug/LiveBug name, file:line, what, rewrite), see kernel_patterns
    suspects: tuple[tuple[str, str | None, str, str], ...] = ()
    # the @wp.func functions with a hand-written adjoint (@wp.func_grad, a native adjoint snippet) the kernel calls
    custom_adjoint: tuple[str, ...] = ()
    # whether the program trains through the launch (exec: it updates params from their gradients; None: run's
    # scenario params, trained by definition); a hand-written adjoint that disagrees is a bug only then
    trained: bool | None = None
    # (adjoint, FD) of every settled direction of the test (whole, inputs alone): the disagreement's shape
    probes: tuple[tuple[float, float], ...] = ()


# BlameResult.why of the default adjoint test of exec and audit() (gradcheck.observe.kernel_tests)
DEFAULT_ADJOINT_TEST = "the first launch of each kernel"


def not_checked_reasons(verdicts) -> dict[str, int]:
    """Why launches were not checked: one reason per launch, counted, most common first."""
    counts: dict[str, int] = {}
    for v in verdicts:
        if v.status == "not-checked":
            reason = v.note or "no reason given"
            counts[reason] = counts.get(reason, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: -item[1]))


@dataclass(frozen=True)
class BlameResult:
    """Every launch's verdict, and why the test did not run or stopped early."""

    verdicts: tuple[LaunchVerdict, ...] = ()
    why: str = ""  # "--blame always" | "fd-mismatch fired"
    skipped: str | None = None
    note: str | None = None  # e.g. the copy budget was exceeded from launch #k
    seconds: float = 0.0


@dataclass(frozen=True)
class ChangedInput:
    """An array a recorded launch read that changed, outside the tape's launches, between that launch and
    tape.backward."""

    subject: str
    readers: tuple[str, ...]  # "launch #12 chain_energy (spring_chain.py:104)", first few
    reader_count: int  # launches on the tape that read it
    first_reader: int | None = None  # tape position of the first launch that read it (fingerprinted right after it)


@dataclass(frozen=True)
class ChainBreak:
    """Where the chain from a param to the loss breaks, for a param whose gradient is zero or absent
    (gradcheck.diagnose.chain_break): the array and the launch at the break, the cause, and what to change."""

    param: str  # the param's key (ParamTrace.name)
    cause: str  # one of gradcheck.diagnose.chain_break.CAUSES
    array: str | None  # the array at the break
    launch: str | None  # "kernel (file:line)", "wp.copy (file:line)", "numpy() (file:line)"
    index: int | None  # the launch's position on the tape, when it is on the tape
    detail: str  # one sentence: where and why
    fix: str
    path: tuple[str, ...] = ()  # the arrays from the param to the break


@dataclass(frozen=True)
class CarriedArray:
    """An array that carries state from one forward() to the next (see gradcheck.rerun.carried_state)."""

    subject: str  # the array, as the scenario holds it: "clock", "loss"
    how: str  # "read before this forward writes it" | "accumulated into without being cleared"
    kernel: str  # the first launch that used it


# -- probes run after the passes ----------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One central difference: the step (relative to each param's scale), the estimate and its noise bound."""

    eps: float
    fd: float
    noise: float  # derivative units: what the loss's noise alone can move this estimate by
    behind: float | None = None  # one-sided differences (f(x) - f(x - eps)) / eps and (f(x + eps) - f(x)) / eps
    ahead: float | None = None


@dataclass(frozen=True)
class Probe:
    """One directional or element-wise comparison of the tape's derivative with finite differences."""

    label: str  # "direction 2" or an element path such as "controls[37].joint_f[1]"
    ad: float
    fd: float  # the estimate judged: the first step's when it agreed, else the converged (or last) one
    eps: float  # the step that gave it
    rel_error: float  # disagreement beyond the noise, relative to the derivative's size: what the bands judge
    abs_error: float  # |fd - ad|
    noise: float  # the estimate's noise bound, in derivative units
    noise_floor: float = 0.0  # noise / the derivative's size: disagreements below this cannot be seen
    converged: bool = True  # estimates at two steps agreed within their noise (or the first step agreed with AD)
    steps: tuple[Step, ...] = ()  # every step tried, in order
    # (left, right) one-sided derivatives when the loss has a kink at the params along this direction (no verdict)
    kink: tuple[float, float] | None = None


@dataclass(frozen=True)
class FDResult:
    mode: str
    directions: tuple[Probe, ...] = ()
    elements: tuple[Probe, ...] = ()
    rollouts: int = 0
    loss: float = math.nan
    skipped: str | None = None  # why no comparison was made
    warn: float = 1e-2  # the bands this run was judged with
    error: float = 1e-1
    noise_level: float | None = None  # sigma of the loss's computational noise (ECnoise), when it was measured
    repeat_loss: float | None = None  # the unperturbed loss evaluated again: it must equal `loss`
    restored_arrays: int = 0  # program arrays (params aside) put back to the first pass's start before each rollout
    # the param direction (key → numpy step) of the worst converged disagreement: the blame probe follows it,
    # so the launches it tests move the way the failing direction moved the program
    culprit_direction: Mapping | None = field(default=None, compare=False, repr=False)
    state_note: str | None = None  # why the program's arrays were not kept (over the memory budget)

    @property
    def max_direction_error(self) -> float:
        return max((p.rel_error for p in self.directions), default=0.0)

    @property
    def probes(self) -> tuple[Probe, ...]:
        return self.directions + self.elements

    @property
    def disagrees(self) -> bool:
        """A direction or element converged on a disagreement at or beyond the warning band: fd-mismatch fires."""
        return not self.skipped and any(p.converged and p.rel_error >= self.warn for p in self.probes)

    @property
    def noise_floor(self) -> float:
        """The largest relative disagreement the noise could hide in the directional check (the elements' when
        only elements ran): a 0.0 ``max_direction_error`` means "below this", not "exact"."""
        return max((p.noise_floor for p in self.directions or self.elements), default=0.0)

    @property
    def converged(self) -> bool:
        return all(p.converged for p in self.probes)


@dataclass(frozen=True)
class Rewrite:
    array: str  # owner path, e.g. "solver.J" (families like "states[*].body_q" are grouped by the check)
    reader: str  # kernel that read it
    writer: str  # later kernel that rewrote it
    count: int  # occurrences on the tape
    changed: bool  # the rewrite changed the values the reader saw


@dataclass(frozen=True)
class ReplayResult:
    """The reentrancy probe's result (``Trace.replay``: the public name predates the word; nothing here replays)."""

    reentrant: bool | None = None
    grad_diff: float = 0.0  # largest relative difference of a param gradient between the two backward passes
    worst_param: str | None = None
    changed_during_backward: tuple[str, ...] = ()
    launches: int = 0
    skipped: str | None = None


@dataclass(frozen=True)
class Trace:
    """Everything the checks read. ``loss_repeats`` is False when forward() is not a function of the params."""

    scenario: str
    fault: str | None
    device: str
    options: Mapping = field(default_factory=dict)
    params: tuple[ParamTrace, ...] = ()
    passes: tuple[PassRecord, ...] = ()
    tolerance: float = 0.0  # relative tolerance behind ParamPass.equal_to_first; 0 means bitwise
    zero_step: str = "tape.zero()"  # how the gradients were cleared between passes
    clip_norm: float | None = None  # --clip-norm applied after readout, if any
    fd: FDResult | None = None  # finite differences, after the passes
    replay: ReplayResult | None = None  # the reentrancy probe, after the passes
    carried_state: tuple[CarriedArray, ...] | None = None  # when the loss changed at fixed params: the roots
    no_backward_kernels: tuple[str, ...] = ()  # kernels on the tape built with enable_backward=False
    # arrays launches read that changed between forward() and tape.backward (pass 1); None: not watched
    changed_before_backward: tuple[ChangedInput, ...] | None = None
    launch_checks: BlameResult | None = None  # the per-launch adjoint test, when it ran
    warp_version: str = ""  # wp.__version__: which known upstream bugs (gradcheck.model.known_bugs) apply
    # every pass started from the same param values (gradcheck run restores them): then pass k's gradient must
    # equal pass 1's, and the loss must repeat. A program training under gradcheck exec moves its params.
    fixed_params: bool = True
    backwards: int = 0  # tape.backward calls (and graph launches) observed
    iterations: int = 0  # passes, or backwards of a program: ≥ len(passes) when a long run kept only some records
    internal_errors: tuple[InternalError, ...] = ()  # checks, probes, observer parts that failed on this program
    # a long program's backwards audited in full only by a cadence (gradcheck.observe.cadence): first, every,
    # backwards, audited; None when every backward was
    sampling: Mapping[str, int] | None = None
    # --graph: one backward's dataflow (gradcheck.tape.flow_graph.FlowGraph.picture), labels only: the first
    # audited backward with a chain break or a changed input, else the first audited one; None when not asked for
    dataflow: object | None = None
    bridge: tuple[BridgeIssue, ...] = ()  # torch<->Warp bridge mistakes (gradcheck exec on a PyTorch program)
    cross_rank: tuple[RankDivergence, ...] = ()  # what differs across the ranks of a DDP job (exec under torchrun)

    @property
    def loss_repeats(self) -> bool:
        """The same params gave the same loss on every pass (bitwise on CPU; within atomics' noise on CUDA); always
        True when the params moved between passes (there is nothing to compare)."""
        return not self.fixed_params or losses_repeat([p.loss for p in self.passes], self.tolerance)

    @property
    def stateful_forward(self) -> bool:
        """forward() carries state between calls: the loss changed at the same params, or, within the noise of
        CUDA's float atomics, the state probe found the arrays that carry it (a clock advanced by 0.5 a pass moves
        the loss by less than that noise while it moves gradients far beyond it)."""
        return not self.loss_repeats or bool(self.carried_state)

    @property
    def unit(self) -> str:
        """What a report counts: "pass" when every pass restarted from the same params (gradcheck run), "backward"
        when the program trains (gradcheck exec, audit()). Wording only: no check decides anything from it."""
        return "pass" if self.fixed_params else "backward"

    @property
    def units(self) -> str:
        return "passes" if self.fixed_params else "backwards"

    def record(self, index: int) -> PassRecord | None:
        """The kept record of pass (or backward) ``index``."""
        return next((r for r in self.passes if r.index == index), None)


def losses_repeat(losses, tolerance: float) -> bool:
    """``tolerance`` 0: bitwise; else relative (CUDA's nondeterministic float atomics)."""
    known = [x for x in losses if x is not None and x == x]
    if len(known) < 2:
        return True
    first = known[0]
    return all(x == first or abs(x - first) <= tolerance * max(abs(x), abs(first)) for x in known[1:])
