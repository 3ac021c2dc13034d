"""The observer's configuration: one frozen value, built from the check options by every driver.

The observer used to be configured by assigning its attributes after construction, each driver its own way, and
one forgot one: ``gradcheck.audit(max_norm=100)`` judged an explosion at 100 but looked for where it started only
above the default 1e6. Now ``run``, ``exec``, ``blame`` and ``gradcheck.audit()`` each build an ``ObserverConfig``
with ``observer_config(checks, ...)`` (the check options' thresholds go in here, once) and hand it to the
observer's constructor; nothing outside the observer sets its attributes afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gradcheck.model.options import AUDIT_EVERY as EVERY
from gradcheck.model.options import AUDIT_FIRST as FIRST
from gradcheck.model.options import DEFAULT_CHECKS, CheckOptions


@dataclass(frozen=True)
class Cadence:
    """Which backwards get the full evidence (observe.cadence says why): the first ``first``, then every
    ``every``-th and the one after it."""

    first: int = FIRST
    every: int = EVERY

    def full(self, backward: int) -> bool:
        """Whether backward number ``backward`` (1-based) gets the full evidence."""
        if self.every <= 1 or backward <= self.first:
            return True
        past = backward - self.first  # the pairs: first + k * every and the backward after it, k >= 1
        return past >= self.every and past % self.every in (0, 1)

    def describe(self, backwards: int, audited: int) -> dict:
        return {"first": self.first, "every": self.every, "backwards": backwards, "audited": audited}


ALL = Cadence(first=0, every=1)


@dataclass(frozen=True)
class ObserverConfig:
    # the driver's model of an iteration: the runner opens and closes each pass (False), a program's every
    # backward is one (True); a scenario's passes start from the same params (fixed_params: pass k's gradient
    # must equal pass 1's, within ``tolerance``)
    auto_iterations: bool = True
    fixed_params: bool = False
    tolerance: float = 0.0
    device: str | None = None  # the runner's device; None: each backward's own
    stop_on_dangling: bool = False  # exec without --keep-going: a dangling adjoint pointer stops the program
    # what each recording read, fingerprinted at launch time (changed-before-backward): on every iteration, or on
    # the first only (the runner: every pass runs the same forward)
    watch_inputs: Literal["every", "first"] = "every"
    cadence: Cadence = ALL  # which backwards get the full evidence (observe.cadence)
    max_norm: float = DEFAULT_CHECKS.max_norm  # where an exploding adjoint's origin is looked for: the judged norm
    keep_dataflow: bool = False  # --graph: keep a picture of one backward's dataflow


def observer_config(checks: CheckOptions = DEFAULT_CHECKS, **driver) -> ObserverConfig:
    """The observer's configuration for ``checks`` (the thresholds the checks judge with) and the driver's own
    settings (``auto_iterations``, ``fixed_params``, ``cadence``, …: the fields of ObserverConfig)."""
    return ObserverConfig(max_norm=checks.max_norm, **driver)
