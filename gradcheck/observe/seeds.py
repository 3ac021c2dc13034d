"""What a backward seeded with ``grads=`` started from: are the seeded outputs' values and the seeds finite?

A program without a scalar loss (a Jacobian row, a vector-Jacobian product: ``tape.backward(grads={y: seed})``)
has no loss value to tell a NaN the forward made from one backward made alone. Its seeded outputs are that
evidence: read right before backward runs (the forward's values, before anything the program does after), with the
seeds, in one statistics launch. Only for grads= backwards, so a program with a scalar loss pays nothing.
"""

from __future__ import annotations

from gradcheck.model.seeded import SeededBackward


def seeded_backward(loss, grads, label) -> SeededBackward | None:
    """The SeededBackward of a ``tape.backward(grads=grads)`` (None for a loss backward, or one without seeds);
    ``label(array)`` names an output as the program does. An output or seed that is not a float array, or whose
    memory may have been freed, leaves its side unknown (None), never "not finite"."""
    if loss is not None or not grads:
        return None
    outputs, seeds = list(grads.keys()), list(grads.values())
    return SeededBackward(
        outputs=tuple(label(a) for a in outputs),
        values_finite=_all_finite(outputs),
        seeds_finite=_all_finite(seeds),
    )


def _all_finite(arrays) -> bool | None:
    """True when every array is finite, False when one holds a NaN or Inf, None when one cannot be read."""
    from gradcheck.probes.liveness import readable
    from gradcheck.probes.stats import gradient_stats
    from gradcheck.probes.warp_compat import is_float_array

    if not arrays or not all(
        getattr(a, "dtype", None) is not None and is_float_array(a) and readable(a) for a in arrays
    ):
        return None
    return all(s.nonfinite == 0 for s in gradient_stats(arrays))


def merged(first: SeededBackward | None, second: SeededBackward | None) -> SeededBackward | None:
    """One iteration's evidence when it ran several seeded backwards: finite only if every one was."""
    if first is None or second is None:
        return first or second

    def both(a: bool | None, b: bool | None) -> bool | None:
        if a is False or b is False:
            return False
        return None if a is None or b is None else True

    outputs = tuple(dict.fromkeys((*first.outputs, *second.outputs)))
    values, seeds = both(first.values_finite, second.values_finite), both(first.seeds_finite, second.seeds_finite)
    return SeededBackward(outputs, values, seeds)
