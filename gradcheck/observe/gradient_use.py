"""What the program does with a gradient between the backward that produced it and the next zero step.

Two facts come out of watching the launches and host reads of that window:

- **updates**: a launch that takes ``x`` and ``x.grad`` and writes ``x`` (statically: its code stores into that
  argument) updates ``x`` from its gradient, so ``x`` is a parameter (gradcheck.observe.params), whether or not
  any tape reads it;
- **a gradient read after the update that consumed it rewrote it** (``mutated-gradient``): an optimizer that
  keeps its state in the gradient buffer (AdamW ScheduleFree in PyTorch) leaves a gradient that whatever reads it
  next (a logged norm, a clip, a second optimizer) takes for the real one: ~700 logged where the truth is below 5.
  A rewrite *before* the update (projecting the gradient onto constraints, clipping it in place, as Warp's FEM
  shape optimisation does before Adam) is the program preparing the gradient its update consumes: not a finding.

A rewrite counts as the update's when the same launch changed both the param and its gradient (fingerprints
before and after it); reads are launches whose code loads the gradient, ``array.numpy()`` on it, and the driver's
own readout (``gradcheck run`` reads after ``after_backward()``, where its contract says the loop reads).
"""

from __future__ import annotations

from dataclasses import dataclass

from gradcheck.model.trace import GradientRewrite
from gradcheck.probes.sites import caller_site, short


@dataclass
class _Produced:
    grad: object
    owner: object
    checksum: int  # what backward left (fingerprint)
    subject: str
    norm: float


class GradientUse:
    """``start(...)`` after a backward, ``before``/``after`` around launches, ``read`` on host reads, ``close()``
    at the next zero step or backward (returns the rewrites that were read)."""

    def __init__(self, fingerprint, norm_of) -> None:
        self._fingerprint, self._norm_of = fingerprint, norm_of
        # keyed by the gradient's memory (data pointer), not its object: a view of it is the same gradient
        self._produced: dict[int, _Produced] = {}  # grad pointer → what backward left there
        self._pending: dict[int, str] = {}  # grad pointer → the update launch that rewrote it (label)
        self._found: dict[int, GradientRewrite] = {}

    @property
    def active(self) -> bool:
        return bool(self._produced)

    def start(self, produced: list[tuple[object, object, int, str, float]]) -> None:
        """(grad, owner, fingerprint, subject, norm) of every gradient backward produced for a measured array."""
        self._produced = {g.ptr: _Produced(g, owner, fp, subject, norm) for g, owner, fp, subject, norm in produced}
        self._pending, self._found = {}, {}

    def close(self) -> tuple[GradientRewrite, ...]:
        found = tuple(self._found.values())
        self._produced, self._pending, self._found = {}, {}, {}
        return found

    def before(self, call, arguments, updates: list) -> list | None:
        """``updates``: (param, grad) pairs this launch updates. Returns what ``after`` needs, or None."""
        if not self._produced:
            return None
        from gradcheck.probes.warp_compat import argument_access

        by_ptr = {getattr(value, "ptr", None): label for label, value in arguments}
        touched = [p for key, p in self._produced.items() if key in by_ptr]
        if not touched:
            return None
        access = argument_access(call.kernel)
        updating = {g.ptr for _param, g in updates}
        token = []
        for p in touched:
            label = by_ptr[p.grad.ptr]
            if p.grad.ptr in self._pending and access.reads_value(label):
                self._read(p, f"launch {getattr(call.kernel, 'key', call.kernel)} ({short(caller_site())})")
            if p.grad.ptr in updating and access.writes_to(label):  # an update that may rewrite it
                token.append((p, self._fingerprint(p.grad), self._fingerprint(p.owner)))
        return token

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
