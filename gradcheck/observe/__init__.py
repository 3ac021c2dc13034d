"""The one observer: how gradcheck sees a Warp program's autodiff, whoever drives the program.

``gradcheck run`` drives a scenario's passes, ``gradcheck exec`` runs an unmodified program, ``gradcheck.audit()``
wraps code in a notebook or a test; all three hand the program to the same Observer (observe.observer), which
sees it only through gradcheck.warp_compat.hooks and records per-iteration evidence (model.trace) for the
one check registry (gradcheck.checks). What only ``run`` adds is what needs the forward run again: finite
differences, the stateful-forward probe, the reentrancy probe and the per-launch blame.
"""

from gradcheck.observe.guard import DanglingAdjointStop
from gradcheck.observe.observer import Observer

__all__ = ["DanglingAdjointStop", "Observer"]
