"""What a backward leaves in the gradient buffers its tape reaches, and what the zero step leaves of it.

After every backward the buffers the tape can reach (kernel arguments, struct fields, array-of-structs records,
``tape.gradients``, the params) are known and their checksums taken (one device launch). Then:

- **the zero step** (``tape.zero()``/``reset()``, a scenario's ``zero(tape)``): every one of them must be zero
  afterwards; the nonzero ones are *survivors* (``zero-audit``). A program that never calls a zero step but starts
  a new iteration (its params moved, or the driver started a new pass) is audited when the next backward starts,
  on the buffers that still hold exactly what the last backward left (memory nobody zeroed before a first
  backward, or a seed the program refills itself, is not a leftover);
- **the next backward**: survivors that still hold their values when a backward of a later iteration starts are
  *residue*: that backward adds to them. In a param's own gradient, or in an array that depends on a param on this
  tape (backward propagates it into the param), residue is accumulation (``accumulation``). Survivors the backward
  leaves bit-identical were refilled or untouched: nothing accumulated (``kept``).

Cost: one statistics launch over every reachable buffer after each backward and at each zero step (buffers are
reused while the tape passes the same arrays), one over the few survivors at the next backward.
"""

from __future__ import annotations

from dataclasses import dataclass

from gradcheck.measure.host_stats import host_checksums
from gradcheck.measure.liveness import readable
from gradcheck.measure.stats import StatsPlan
from gradcheck.model.trace import Residue, Survivor

FEW_LOOKUPS = 64  # reached buffers: up to this many, every measured one is looked up instead of read again
KNOWN_FROM = 1 << 16  # elements: a measured gradient this large is never read again for the checksums


def buffer_key(array) -> tuple:
    """What makes two array objects the same buffer for a checksum: memory, extent, element type."""
    return (array.ptr, array.size, array.dtype, getattr(array, "strides", None))


def _measured_checksums(measured: dict, stats: dict) -> dict:
    """pointer → (``buffer_key``, checksum) of each measured array's gradient (``stats``: key → its statistics, read
    right after the backward): the same checksums of the same buffers at the same moment the leftovers need."""
    known = {}
    for key, array in measured.items():
        reading = stats.get(key)
        grad = getattr(array, "grad", None)
        if reading is not None and grad is not None:
            known[grad.ptr] = (buffer_key(grad), reading.checksum)
    return known


@dataclass
class Left:
    """A survivor of the last zero audit, with what it held then."""

    grad: object
    owner: object
    subject: str
    checksum: int
    norm: float
    nonzero: int
    left_by: int  # the backward that left it


class Leftovers:
    def __init__(self, device, names, remember_left: bool = True) -> None:
        """``remember_left=False``: the driver runs a zero step after every backward (``gradcheck run``'s passes),
        so what a backward left is never compared with the next backward's start (the zero-step-less audit below):
        its checksums are not taken (a launch over every reachable buffer, ~2,400 of a Newton rollout's, a pass)."""
        self._device, self._names, self._remember_left = device, names, remember_left
        self._after_plan, self._audit_plan, self._check_plan = StatsPlan(), StatsPlan(), StatsPlan()
        self._zero_plan = StatsPlan()
        self._zeroed = None  # the reachable buffers as tape.zero() left them (until the audit)
        self._reach = None  # the buffers the last backward's tape reached
        self._left = None  # their checksums right after that backward
        self._reseeded: set[int] = set()  # gradient pointers every backward refills (the loss's: fill_(1.0))
        self._seeded: set[int] = set()  # gradient pointers of tape.backward(grads=...) seeds
        self._backward = 0
        self._audited = True
        self.survivors: list[Left] = []  # of the last zero audit
        self._watched: list[Left] = []  # survivors the running backward may add to

    @property
    def audited(self) -> bool:
        """A zero audit ran since the last backward."""
        return self._audited

    def after_backward(
        self, index: int, reach, reseeded: set[int], seeded: set[int], measured: dict | None = None, stats=None
    ) -> None:
        """Remember what backward ``index`` reached and left. ``measured`` and ``stats``: the arrays the observer
        measured this very moment and their gradients' statistics (key → array, key → GradStats): their checksums
        are not read again (a 16M-float gradient costs ~50 ms a read on CPU, the whole of a pass)."""
        self._reach = reach
        if self._remember_left:
            self._left = self._checksums(reach.grads, _measured_checksums(measured or {}, stats or {}))
        else:
            self._left = None
        # seeds add up over the backwards before a zero step (one backward per output seeds each output in turn)
        self._reseeded |= reseeded
        self._seeded |= seeded
        self._backward, self._audited, self._zeroed = index, False, None

    def _checksums(self, grads: list, known: dict):
        """The checksum of each of ``grads``: from ``known`` (pointer → (``buffer_key``, checksum)) where it has one,
        the rest summed on the host or in one statistics launch."""
        import numpy as np

        if len(grads) > FEW_LOOKUPS:  # a lookup per buffer costs more than the launch, except for large gradients
            known = {ptr: entry for ptr, entry in known.items() if entry[0][1] >= KNOWN_FROM}
        found = {}  # index → checksum (a Newton tape reaches ~2,400 buffers: the pointer is looked up first)
        for i, grad in enumerate(grads if known else ()):
            entry = known.get(grad.ptr)
            if entry is not None and entry[0] == buffer_key(grad):
                found[i] = entry[1]
        if not found:
            return self._after_plan.table(grads, device=self._device).columns["checksum"].copy()
        left = np.zeros(len(grads), dtype=np.uint64)
        left[list(found)] = list(found.values())
        rest = [i for i in range(len(grads)) if i not in found]
        if rest:
            others = [grads[i] for i in rest]
            host = host_checksums(others)
            left[rest] = (
                host if host is not None else self._after_plan.table(others, device=self._device).columns["checksum"]
            )
        return left

    def audit(self, only_left: set[int] | None = None) -> tuple[tuple[Survivor, ...], int]:
        """The zero audit: (survivors, buffers looked at). ``only_left`` (the gradient pointers the backward about
        to run can add to): no zero step was seen, so only buffers still holding what the last backward left, and
        that this backward reaches, count (another test's tape over other arrays adds nothing to them)."""
        if self._reach is None or only_left is not None and self._left is None:
            return (), 0  # (a driver's pass given up half-way, with no zero step: not evidence)
        reach, names = self._reach, self._names
        snapshot, self._zeroed = self._zeroed, None
        table = snapshot if snapshot is not None else self._audit_plan.table(reach.grads, device=self._device)
        candidates = [i for i in table.nonzero_indices() if reach.grads[i].ptr not in self._reseeded]
        now = self._rewritten(table, candidates) if snapshot is not None else set()
        survivors, kept = [], []
        for i in candidates:
            grad = reach.grads[i]
            stats = table.row(i)
            left = only_left is not None and (stats.checksum != int(self._left[i]) or grad.ptr not in only_left)
            if left or i in now:
                continue
            buffer = reach.buffer(i)
            survivor = Survivor(
                subject=_subject(buffer, names),
                reached_via=buffer.reached_via,
                norm=stats.norm,
                nonzero=stats.nonzero,
                size=stats.size,
                aliases=tuple(buffer.aliases),
                seeded=grad.ptr in self._seeded,
            )
            survivors.append(survivor)
            kept.append(Left(grad, reach.owner(i), survivor.subject, stats.checksum, stats.norm, stats.nonzero,
                             self._backward))  # fmt: skip
        self.survivors, self._audited = kept, True
        return tuple(survivors), len(reach)

    def forget(self) -> None:
        """Backwards go unaudited from here (observe.cadence): nothing watched so far is judged against them."""
        self._reach = self._left = self._zeroed = None
        self.survivors, self._watched, self._audited = [], [], True

    def zeroed(self) -> None:
        """``tape.zero()`` just returned: what it left is read now. The audit itself waits for the end of the zero
        step (a program may zero the rest by hand after it), and then counts only buffers still holding exactly
        what ``tape.zero()`` left: one written since (``x.grad.fill_(0.25)``, an assign: a seed the program sets
        on purpose for the next backward to add to) is the program's choice, not a leftover."""
        if self._reach is not None:
            self._zeroed = self._zero_plan.table(self._reach.grads, device=self._device)

    def _rewritten(self, table, candidates: list[int]) -> set[int]:
        """Of ``candidates`` (rows of a table read at ``tape.zero()``), those whose buffer changed since."""
        if not candidates:
            return set()
        rows = self._check_plan.table([self._reach.grads[i] for i in candidates], device=self._device).rows()
        return {i for i, row in zip(candidates, rows) if row.checksum != table.row(i).checksum}

    def new_iteration(self) -> None:
        """Seeds are told apart per iteration: the next one seeds afresh."""
        self._reseeded, self._seeded = set(), set()

    def residue(self) -> list[Left]:
        """Survivors still holding exactly their values now, as a backward of a new iteration starts."""
        self._watched = []
        if not self.survivors:
            return []
        alive = [s for s in self.survivors if readable(s.grad)]  # never memory the program may have freed
        rows = self._check_plan.table([s.grad for s in alive], device=self._device).rows() if alive else []
        self._watched = [s for s, row in zip(alive, rows) if row.checksum == s.checksum]
        return [s for s in self._watched if s.nonzero]

    def kept(self) -> tuple[str, ...]:
        """The watched survivors the iteration's backwards left bit-identical (refilled or untouched); asked once,
        when the iteration's backward phase ends."""
        watched, self._watched = [s for s in self._watched if readable(s.grad)], []
        if not watched:
            return ()
        rows = self._check_plan.table([s.grad for s in watched], device=self._device).rows()
        return tuple(s.subject for s, row in zip(watched, rows) if row.checksum == s.checksum)

    def watch(self) -> None:
        """Watch the last audit's survivors through the next backward without judging residue (same iteration)."""
        self._watched = list(self.survivors)


def _subject(buffer, names) -> str:
    """The program's name for the buffer: its own, or its owner's with ``.grad`` (remembered after the frame that
    held it returned), else the path the tape reached it by."""
    if buffer.reached_via != "array of structs":
        own = names.known(buffer.grad)
        if own is not None:
            return own
        owner = names.known(buffer.owner)
        if owner is not None:
            return owner + ".grad"
    return buffer.subject(names.names)


def classify_residue(left: list[Left], book, names) -> tuple[Residue, ...]:
    """Residue records for the leftovers a backward starts with: in a param's own gradient ("param"), in an array
    that depends on params on the tape running now ("upstream": backward propagates it into them), or elsewhere."""
    from gradcheck.observe.dataflow import influence

    params = book.params()
    flow = influence(names.tape, params)
    subjects = [names.gradient_subject(p) for p in params]
    own = {id(p) for p in params}
    found = []
    for entry in left:
        owner = entry.owner
        if owner is not None and book.is_param(owner):
            role, feeds = "param", (entry.subject,)
        elif owner is not None and flow.of(owner) and id(owner) not in own:
            role, feeds = "upstream", tuple(subjects[i] for i in sorted(flow.of(owner)))
        else:
            role, feeds = "other", ()
        found.append(Residue(entry.subject, entry.norm, entry.nonzero, role, feeds, entry.left_by, False))
    return tuple(found)
