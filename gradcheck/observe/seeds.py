"""What a backward seeded with ``grads=`` started from: are the seeded outputs' values and the seeds finite?

A program without a scalar loss (a Jacobian row, a vector-Jacobian product: ``tape.backward(grads={y: seed})``)
has no loss value to tell a NaN the forward made from one backward made alone. Its seeded outputs are that
evidence: read right before backward runs (the forward's values, before anything the program does after), with the
seeds, in one statistics launch. Only for grads= backwards, so a program with a scalar loss pays nothing.
"""

from __future__ import annotations

from gradcheck.model.seeded import SeededBackward, known_all


def seeded_backward(loss, grads, label) -> SeededBackward | None:
    """The SeededBackward of a ``tape.backward(grads=grads)`` (None for a loss backward, or one without seeds);
    ``label(array)`` names an output as the program does. An output or seed that is not a float array, or whose
    memory may have been freed, leaves its side unknown (None), never "not finite"."""
    if loss is not None or not grads:
        return None
    from gradcheck.measure.stats import gradient_stats

    outputs, seeds = list(grads.keys()), list(grads.values())
    read_outputs, read_seeds = (side if _readable(side) else [] for side in (outputs, seeds))
    arrays = read_outputs + read_seeds
    finite = [s.nonfinite == 0 for s in gradient_stats(arrays)] if arrays else []  # one launch for both sides
    return SeededBackward(
        outputs=tuple(label(a) for a in outputs),
        values_finite=all(finite[: len(read_outputs)]) if read_outputs else None,
        seeds_finite=all(finite[len(read_outputs) :]) if read_seeds else None,
    )


def _readable(arrays) -> bool:
    """Every array a float array whose memory gradcheck may read."""
    from gradcheck.measure.liveness import readable
    from gradcheck.warp_compat import is_float_array

    return bool(arrays) and all(
        getattr(a, "dtype", None) is not None and is_float_array(a) and readable(a) for a in arrays
    )


def merged(first: SeededBackward | None, second: SeededBackward | None) -> SeededBackward | None:
    """One iteration's evidence when it ran several seeded backwards: finite only if every one was."""
    if first is None or second is None:
        return first or second
    outputs = tuple(dict.fromkeys((*first.outputs, *second.outputs)))
    return SeededBackward(
        outputs,
        known_all(first.values_finite, second.values_finite),
        known_all(first.seeds_finite, second.seeds_finite),
    )
