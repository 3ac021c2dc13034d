"""Where a bad gradient started, as the checks say it: the first backward launch that made it (one place for
``nonfinite`` and ``explosion``, which read the same evidence off the pass records)."""

from __future__ import annotations

from collections.abc import Mapping

from gradcheck.model.evidence import Origin
from gradcheck.model.trace import Trace


def first_origin(trace: Trace, kind: str):
    """The first recorded origin of ``kind`` ("nonfinite" | "growth") over the passes, or None."""
    for record in trace.passes:
        for found_kind, origin in record.origins:
            if found_kind == kind:
                return origin
    return None


def origin_text(origin, what: str, verb: str = "it starts") -> str:
    """ "it starts in backward at launch #14 integrate (train.py:40), forward step 15 of 20, the first to make
    integrate.q.grad non-finite": the launch, the step of the rollout (counted as the forward ran), the adjoint."""
    from gradcheck.model.sites import short_site

    site = f" ({short_site(origin.site)})" if origin.site else ""
    step = f", forward step {origin.step} of {origin.steps}" if origin.steps > 1 else ""
    return f"{verb} in backward at launch #{origin.index} {origin.kernel}{site}{step}, the first to make {origin.array} {what}"


def origin_evidence(origin) -> dict:
    return {
        "index": origin.index,
        "kernel": origin.kernel,
        "site": origin.site,
        "step": origin.step,
        "steps": origin.steps,
        "array": origin.array,
        "value": origin.value,
    }


def origin_mark(origin: Mapping, what: str) -> Origin:
    """The ``origin`` evidence (``origin_evidence``) as the mark ``--graph`` draws: where ``what`` starts."""
    return Origin(what, origin.get("index"), origin.get("kernel"), origin.get("site"), origin.get("array"))
