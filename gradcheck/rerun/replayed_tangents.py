"""The program's own tangent of each launch's inputs, from a recording alone (``gradcheck exec`` cannot run the
program's forward again).

A launch tested along a random direction of its inputs is evaluated where the program never goes: Newton's
Featherstone reads one triangle of a symmetric mass matrix, and its solve's adjoint is right for every symmetric
perturbation and wrong for a random one; a quaternion leaves the unit sphere. ``gradcheck run`` takes the program's
tangent from two more forwards at params +- step (gradcheck.rerun.launch_record.record_tangents). Here the same
comes from the recording itself: its launches are replayed in order on private buffers, from the values each read
(copies the recorder made), with the params moved +- step along a random direction; an array a replayed launch
wrote flows on to the launches after it, everything else is read from its copy. The tangent of a launch's input is
the central difference of what it reads in the two replays: every structure the program keeps (symmetry, norms) is
kept. Only launches up to the last one asked for are replayed; nothing of the program's is written.
"""

from __future__ import annotations

import math

from gradcheck.rerun.finite_diff import param_scale
from gradcheck.rerun.launch_values import float_numbers, has_floats, with_float_numbers

STEP = 1e-3  # relative to each param's RMS, as record_tangents


def replayed_tangents(launches, wanted: set[int], params, rng, pool, step: float = STEP) -> dict | None:
    """launch index → {id(array): d(values it read) / dt} for the launches at ``wanted``, or None when the recording
    cannot be replayed (a launch without copies)."""
    from gradcheck.rerun.unit_replay import _launch

    if not wanted:
        return None
    last = max(wanted)
    chain = launches[: last + 1]
    if any(not launch.pre and (launch.arrays_in or launch.arrays_out) for launch in chain):
        return None
    keys = {id(p) for p in params if has_floats(p)}
    direction: dict[int, object] = {}
    seen: dict[int, list] = {}
    for sign in (1.0, -1.0):
        work: dict[int, object] = {}
        produced: set[int] = set()
        try:
            for launch in chain:
                for key, copy in launch.pre.items():
                    if key in produced:
                        continue
                    buffer = work.get(key)
                    if buffer is None:
                        buffer = work[key] = pool.like(copy)
                    if key in keys:  # a param, moved along the direction each time it is read from its copy
                        base = float_numbers(pool.values(copy))
                        if key not in direction:
                            direction[key] = param_scale(base) * rng.standard_normal(base.shape)
                        pool.put(buffer, with_float_numbers(pool.values(copy), base + sign * step * direction[key]))
                    else:
                        pool.copy(buffer, copy)
                if launch.index in wanted:
                    seen.setdefault(launch.index, []).append(
                        {
                            id(a): float_numbers(pool.values(work[id(a)]))
                            for a in launch.arrays_in
                            if has_floats(a) and id(a) in work
                        }
                    )
                _launch(launch, work)
                produced |= launch.writes
        finally:
            for buffer in work.values():
                pool.give(buffer)
    tangents = {}
    for index, (plus, minus) in ((i, pair) for i, pair in seen.items() if len(pair) == 2):
        entry = {}
        for key, up in plus.items():
            down = minus.get(key)
            if down is not None and up.shape == down.shape:
                entry[key] = (up - down) / (2 * step)
        tangents[index] = entry
    if not any(any(math.isfinite(float(abs(v).max(initial=0.0))) for v in e.values()) for e in tangents.values()):
        return None
    return tangents
