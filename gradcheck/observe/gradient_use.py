"""What the program does with a gradient between the backward that produced it and the next zero step.

Two facts come out of watching the launches and host reads of that window:

- **updates**: a launch that takes ``x`` and ``x.grad`` and writes ``x`` (statically: its code stores into that
  argument) updates ``x`` from its gradient, so ``x`` is a parameter (gradcheck.observe.params), whether or not
  any tape reads it;
- **a gradient read after the update that consumed it rewrote it** (``mutated-gradient``): an optimizer that
  keeps its state in the gradient buffer (AdamW ScheduleFree in PyTorch) leaves a gradient that whatever reads it
  next (a logged norm, a clip, a second optimizer) takes for the real one: ~700 logged where the truth is below 5.
  A rewrite *before* the update (projecting the gradient onto constraints, clipping it in place, as Warp's FEM
  shape optimisation does before Adam) is the program preparing the gradient its update consumes: not a finding;
- **a gradient cleared before the update that consumed it** (``mutated-gradient`` too): the zero step moved before
  the optimizer step (Newton's drone with ``tape.zero()`` ahead of ``optimizer.step``) leaves the update reading
  zeros, and training silently does nothing. So a zero step does not end the window: it is noted, and the first
  update that reads each gradient afterwards is compared with what backward left. Cleared means *all zero* where
  backward left a finite, nonzero gradient: a clip, a projection, or a gradient the program computed and wrote
  itself is nonzero, and the program's business. A clearing gradcheck saw as the program's zero step
  (``tape.zero()``) is always reported; one it did not see (``x.grad.zero_()``, ``fill_(0)``: no hook tells
  it apart from freezing a param on purpose) only when every update of the window read zeros, so nothing trained,
  and no launch of the program's own wrote that gradient since backward (a projection onto constraints that pin
  every param, a box's corner, is all zero and still the program's own answer).

A rewrite counts as the update's when the same launch changed both the param and its gradient (fingerprints
before and after it); reads are launches whose code loads the gradient, ``array.numpy()`` on it, and the driver's
own readout (``gradcheck run`` reads after ``after_backward()``, where its contract says the loop reads).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gradcheck.measure.stats import StatsPlan
from gradcheck.model.sites import caller_site, short
from gradcheck.model.trace import ClearedGradient, GradientRewrite


@dataclass
class _Produced:
    grad: object
    owner: object
    checksum: int  # what backward left (fingerprint)
    subject: str
    norm: float
    finite: bool = True  # backward left no NaN/Inf there (a program may clear a NaN gradient to skip the step)


class GradientUse:
    """``start(...)`` after a backward, ``before``/``after`` around launches, ``read`` on host reads, ``zeroed``
    at the program's own zero step (the window stays open), ``close()`` once that zero step is over or at the next
    backward (returns the rewrites that were read and the gradients cleared before their update)."""

    def __init__(self, fingerprint, norm_of, device=None) -> None:
        self._fingerprint, self._norm_of, self._device = fingerprint, norm_of, device
        # keyed by the gradient's memory (data pointer), not its object: a view of it is the same gradient
        self._produced: dict[int, _Produced] = {}  # grad pointer → what backward left there
        self._pending: dict[int, str] = {}  # grad pointer → the update launch that rewrote it (label)
        self._found: dict[int, GradientRewrite] = {}
        self._zeroed_by: str | None = None  # the program's zero step seen since the backward
        # grad pointer → what the first update that read it found: a ClearedGradient, or None (it read a gradient)
        self._consumed: dict[int, ClearedGradient | None] = {}
        self._prepared: set[int] = set()  # grad pointers a launch other than their update wrote since the backward
        self._plan = StatsPlan()  # where all_zero cannot read a gradient in place (CUDA): one plan, kept

    @property
    def active(self) -> bool:
        return bool(self._produced)

    def start(self, produced: list[tuple]) -> None:
        """(grad, owner, stats, subject) of every gradient backward produced for a measured array (``stats``: its
        GradStats right after backward)."""
        self._produced = {
            g.ptr: _Produced(g, owner, stats.checksum, subject, stats.norm, not stats.nonfinite)
            for g, owner, stats, subject in produced
        }
        self._pending, self._found, self._zeroed_by, self._consumed, self._prepared = {}, {}, None, {}, set()

    def zeroed(self, label: str) -> None:
        """The program's zero step (``label``: "tape.zero() at train.py:40"). The window stays open: what backward
        produced stays known, for an update launched after the zero step to be compared with. A read after it reads
        the zeroed buffer, not a rewritten gradient: the rewrites not read by now are not followed further."""
        self._pending = {}
        if self._produced:
            self._zeroed_by = self._zeroed_by or label

    def close(self) -> tuple[tuple[GradientRewrite, ...], tuple[ClearedGradient, ...]]:
        """The window ends: (rewrites read, gradients cleared before the update that read them)."""
        found, cleared = tuple(self._found.values()), self._cleared()
        self._produced, self._pending, self._found, self._zeroed_by, self._consumed = {}, {}, {}, None, {}
        self._prepared = set()
        return found, cleared

    def _cleared(self) -> tuple[ClearedGradient, ...]:
        """Seen zero steps always count; unseen clearings only when no update of the window read a gradient (a
        program freezing some params by zeroing their gradients still trains the others)."""
        hits = [c for c in self._consumed.values() if c is not None]
        if not hits or all(c is not None for c in self._consumed.values()):
            return tuple(hits)
        return tuple(c for c in hits if c.clearer is not None)

    def before(self, call, arguments, updates: list) -> list | None:
        """``updates``: (param, grad) pairs this launch updates. Returns what ``after`` needs, or None."""
        if not self._produced:
            return None
        from gradcheck.tape.launch_access import call_access

        # the argument passed as the gradient itself (the last one of that memory, as the call lists them)
        by_ptr = {use.array.ptr: use.role for use in call_access(call).arguments if use.array is not None}
        touched = [p for key, p in self._produced.items() if key in by_ptr]
        if not touched:
            return None
        updating = {g.ptr for _param, g in updates}
        token = []
        for p in touched:
            role = by_ptr[p.grad.ptr]
            if p.grad.ptr in self._pending and role.reads:
                self._read(p, f"launch {getattr(call.kernel, 'key', call.kernel)} ({short(caller_site())})")
            if p.grad.ptr in updating and p.grad.ptr not in self._consumed and role.reads:
                self._consumed[p.grad.ptr] = self._consumes(p, call)
            elif p.grad.ptr not in updating and role.writes:
                self._prepared.add(p.grad.ptr)  # the program's own kernel rewrote it (a projection, a mask, a clip)
            # an update that may rewrite it (after a zero step it rewrites zeros: the clearing is what matters)
            if p.grad.ptr in updating and role.writes and self._zeroed_by is None:
                token.append((p, self._fingerprint(p.grad), self._fingerprint(p.owner)))
        return token

    def _consumes(self, p: _Produced, call) -> ClearedGradient | None:
        """The first update that reads ``p``'s gradient in this window: what it reads, if backward's gradient was
        cleared (all zero now, nonzero and finite then)."""
        from gradcheck.measure.liveness import readable
        from gradcheck.measure.stats import all_zero

        if not (p.finite and p.norm > 0.0 and math.isfinite(p.norm)) or not readable(p.grad):
            return None  # nothing to lose (or a NaN gradient the program may clear to skip the step)
        cleared = all_zero(p.grad)
        if cleared is None:
            cleared = not self._plan.table([p.grad], device=self._device).row(0).nonzero
        if not cleared or (self._zeroed_by is None and p.grad.ptr in self._prepared):
            # backward's gradient, or one the program rewrote on purpose (a clip; a projection onto constraints that
            # pin every param, at a box's corner, is all zero and still the program's own answer)
            return None
        update = f"launch {getattr(call.kernel, 'key', call.kernel)} ({short(caller_site())})"
        return ClearedGradient(p.subject, self._zeroed_by, update, p.norm)

    def after(self, call, token: list) -> None:
        for p, grad_before, owner_before in token:
            if self._fingerprint(p.grad) == grad_before or self._fingerprint(p.owner) == owner_before:
                continue  # the gradient kept its values, or the param did not move: no update rewrote it
            where = short(caller_site())
            self._pending[p.grad.ptr] = f"launch {getattr(call.kernel, 'key', call.kernel)} ({where})"

    def read(self, array, reader: str | None = None) -> None:
        """A host read of ``array`` (``array.numpy()``), or the driver's readout."""
        key = getattr(array, "ptr", None)
        if key in self._pending:
            self._read(self._produced[key], reader or f"host read ({short(caller_site())})")

    def read_all(self, reader: str) -> None:
        for key in list(self._pending):
            self._read(self._produced[key], reader)

    def _read(self, p: _Produced, reader: str) -> None:
        key = p.grad.ptr
        if key in self._found:
            return  # reported once a window
        now = self._fingerprint(p.grad)
        if now is None or now == p.checksum:
            return  # memory the program may have freed is not read; a gradient put back as it was is the gradient
        self._found[key] = GradientRewrite(p.subject, self._pending[key], reader, p.norm, self._norm_of(p.grad))
