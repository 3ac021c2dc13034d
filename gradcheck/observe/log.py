"""The observer's record of a program, bounded in the number of backwards.

A training run of 10^5 backwards must be as auditable as one of 10, in the same memory. Every iteration updates
each gradient's running summary (a history of at most ``HISTORY`` points, thinned by half whenever it fills, its
peak, its count); full records (a PassRecord and each gradient's ParamPass) are kept for the first
``KEEP_FIRST`` iterations and for every later one with something to say (leftovers, survivors, a rewrite, a
gradient cleared before its update, a changed input, a hazard, a bad pointer, a NaN), up to ``KEEP_NOTABLE`` of
them. The checks read only these.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gradcheck.model.trace import NormSample, ParamPass, ParamTrace, PassRecord
from gradcheck.observe.divergence import GrowthWatch

KEEP_FIRST = 16
KEEP_NOTABLE = 64
HISTORY = 64


@dataclass
class _Gradient:
    subject: str
    shape: tuple
    dtype: str
    passes: list[ParamPass] = field(default_factory=list)
    history: list[NormSample] = field(default_factory=list)
    stride: int = 1
    measured: int = 0
    last: NormSample | None = None
    peak: NormSample | None = None
    value_norm: float = math.nan

    def sample(self, index: int, norm: float, loss: float | None) -> None:
        point = NormSample(index, norm, loss)
        if self.measured % self.stride == 0:
            self.history.append(point)
            if len(self.history) > HISTORY:
                self.history = self.history[::2]
                self.stride *= 2
        self.measured += 1
        self.last = point
        if math.isfinite(norm) and (self.peak is None or norm > self.peak.norm):
            self.peak = point


class IterationLog:
    def __init__(self) -> None:
        self.records: list[PassRecord] = []
        self.iterations = 0
        self._notable = 0
        self._gradients: dict[str, _Gradient] = {}
        self.growth = GrowthWatch()  # the loss and each gradient growing together (fed after each audited backward)

    def knows(self, key: str) -> bool:
        return key in self._gradients

    def add_iteration(self, it, record: PassRecord, measured: dict, reader, names, device) -> None:
        """An iteration closed (observe.iteration, its ``record``): each gradient it measured as a sample (``reader``:
        the observer's GradientReader), each array seen for the first time described (``names``: what it is called)."""
        from gradcheck.observe import values

        clipped = it.extra.get("clipped") or {}
        samples, described = {}, {}
        fresh = [measured[k] for k in it.stats if k in measured and not self.knows(k)]
        norms = values.norms(fresh, device)  # one launch for every array seen for the first time
        for key, stats in it.stats.items():
            samples[key] = reader.record(key, stats, it.readout.get(key), clipped.get(key), index=it.index)
            array = measured.get(key)
            if array is not None and not self.knows(key):
                described[key] = (
                    names.gradient_subject(array),
                    tuple(array.shape),
                    values.dtype_name(array.dtype),
                    norms.get(id(array), float("nan")),
                )
        self.add(record, samples, described)

    def add(self, record: PassRecord, samples: dict[str, ParamPass], described: dict[str, tuple]) -> None:
        """One finished iteration; ``samples``: key → its gradient read after backward; ``described``: key →
        (subject, shape, dtype, value norm) for keys not seen before."""
        self.iterations += 1
        notable = _notable(record, samples.values())
        keep = self.iterations <= KEEP_FIRST or (notable and self._notable < KEEP_NOTABLE)
        if keep and self.iterations > KEEP_FIRST:
            self._notable += 1
        for key, reading in samples.items():
            gradient = self._gradients.get(key)
            if gradient is None:
                subject, shape, dtype, value_norm = described[key]
                gradient = self._gradients[key] = _Gradient(subject, shape, dtype, value_norm=value_norm)
            norm = reading.norm if reading.has_grad and not reading.nonfinite else math.nan
            gradient.sample(record.index, norm, record.loss)
            if keep:
                gradient.passes.append(reading)
        if keep:
            self.records.append(record)

    def traces(self, roles: dict[str, str], finals: dict | None = None) -> tuple[ParamTrace, ...]:
        """One ParamTrace per gradient measured, params before leaves (the order ``roles`` gives); ``finals``: key →
        the value norm now (the params')."""
        finals = finals or {}
        traces = []
        for key in sorted(self._gradients, key=lambda k: list(roles).index(k) if k in roles else len(roles)):
            g = self._gradients[key]
            history = list(g.history)
            if g.last is not None and (not history or history[-1] is not g.last):
                history.append(g.last)
            traces.append(
                ParamTrace(
                    name=key,
                    subject=g.subject,
                    shape=g.shape,
                    dtype=g.dtype,
                    passes=tuple(g.passes),
                    value_norm=g.value_norm,
                    final_value_norm=finals.get(key, math.nan),
                    role=roles.get(key, "leaf"),
                    history=tuple(history),
                    peak=g.peak,
                    measured=g.measured,
                    growth=self.growth.run(key),
                )
            )
        return tuple(traces)


def _notable(record: PassRecord, readings) -> bool:
    return bool(
        record.survivors
        or record.residue
        or record.rewrites
        or record.cleared
        or record.changed
        or record.hazards
        or record.pointer_issues
        or record.backward_skipped
        or any(r.has_grad and (r.nonfinite or not r.equal_to_first) for r in readings)
    )
