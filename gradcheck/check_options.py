"""Thresholds the checks use; documented defaults, configurable from the CLI."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CheckOptions:
    # explosion: a gradient norm above this on any pass (--max-norm)
    max_norm: float = 1e6
    # explosion: the norms of one indexed family (controls[0..T]) spanning more than this factor,
    # growing toward the start of the rollout: backprop through time amplifying
    growth: float = 1e4
    # vanishing: |g| * scale(x) / |loss| below this (float32 cannot resolve the loss change a step
    # along the gradient would make; float32 epsilon is 1.2e-7)
    vanishing: float = 1e-7


DEFAULT = CheckOptions()
