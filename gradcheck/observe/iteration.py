"""One iteration of a program as the observer assembles it: a pass of ``gradcheck run``, or one backward.

Mutable while the iteration runs (the backward, the zero step and the driver each add their part), frozen into a
PassRecord when it ends (``record``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from gradcheck.model.trace import PassRecord


@dataclass
class Iteration:
    index: int
    boundary: bool  # a new iteration of the program: the params moved since the last backward, or a new pass
    started: float = field(default_factory=time.perf_counter)
    site: str | None = None
    loss: float | None = None
    launches: int = 0
    backwards: int = 0
    survivors: tuple = ()
    audited: int = 0
    observations: list = field(default_factory=list)
    skipped: str | None = None
    kept: tuple | None = None
    residue: tuple = ()
    rewrites: tuple = ()
    cleared: tuple = ()
    changed: tuple = ()
    hazards: tuple = ()
    identical: tuple = ()
    zero_step: str | None = None
    breaks: tuple = ()
    origins: tuple = ()
    carried_reads: tuple = ()
    seeded: object = None  # SeededBackward of the grads= backwards (gradcheck.observe.seeds)
    stats: dict = field(default_factory=dict)  # key → GradStats right after the (last) backward
    readout: dict = field(default_factory=dict)  # key → GradStats where the driver reads gradients
    extra: dict = field(default_factory=dict)  # the driver's own fields (clip_total, clipped)

    def settle_residue(self, kept: tuple) -> None:
        """What this iteration's backwards left bit-identical (refilled or untouched): nothing was added there."""
        self.kept = kept
        if self.residue:
            names = set(kept)
            self.residue = tuple(replace(r, kept=r.subject in names) for r in self.residue)

    def record(self, pointer_issues: tuple) -> PassRecord:
        return PassRecord(
            index=self.index,
            loss=self.extra["loss"] if "loss" in self.extra else self.loss,
            launches=self.launches,
            audited_buffers=self.audited,
            survivors=self.survivors,
            seconds=time.perf_counter() - self.started,
            pointer_issues=pointer_issues,
            backward_skipped=self.skipped,
            clip_total=self.extra.get("clip_total"),
            kept_by_backward=self.kept or (),
            site=self.site,
            residue=self.residue,
            rewrites=self.rewrites,
            cleared=self.cleared,
            changed=self.changed,
            hazards=self.hazards,
            identical=self.identical,
            zero_step=self.zero_step,
            breaks=self.breaks,
            origins=self.origins,
            carried_reads=self.carried_reads,
            seeded=self.seeded,
        )
