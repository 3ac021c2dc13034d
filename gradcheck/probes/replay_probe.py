"""Replay hazards: write-after-read on the tape, and backward reentrancy.

Warp's backward re-runs each kernel's forward code from the arrays' *current* contents, in
reverse order, and writes the kernel's outputs again. An array read by launch i and rewritten by a
later launch j (scratch memory shared across steps) no longer holds what launch i read when i's
adjoint runs, so i's gradient uses another step's values. And since backward rewrites forward
outputs, a second backward on the same tape can differ from the first.

One probe forward runs under a Tape subclass that fingerprints every array argument after each
launch (a CRC of its bytes), so the value each reader saw and each writer left is known. A
write-after-read is a finding only when the rewrite changed the values the reader saw (forward
kinematics recomputing the same body_q is harmless). Then backward runs twice on that tape, with
every reachable gradient zeroed in between, and the arrays whose forward values backward changed
are named.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from gradcheck.model.trace import Rewrite


def fingerprint(array) -> int:
    """CRC of the array's values: -0.0 and 0.0 count as the same value (a kernel that writes ``-x`` into zeros
    changes bytes, not numbers; Newton's eval_rigid_tau does exactly that to body_f_ext)."""
    import numpy as np

    values = np.ascontiguousarray(array.numpy())
    if not values.size:
        return 0
    if values.dtype.kind == "f":
        with np.errstate(invalid="ignore"):  # uninitialised memory may hold signalling NaNs: they stay NaN
            values = values + values.dtype.type(0)  # IEEE: -0.0 + 0.0 == +0.0; every other value is unchanged
    return zlib.crc32(values.view(np.uint8).reshape(-1))


def arrays_of(value, array_type):
    """Arrays in a launch argument: the array itself, or the array fields of a struct (recursively)."""
    from gradcheck.probes.warp_compat import is_struct_instance, struct_fields

    if isinstance(value, array_type):
        if getattr(value, "ptr", None):  # an object that only claims to be an array (a fixedarray) has none
            yield value
    elif is_struct_instance(value):
        for _name, field_value, _var in struct_fields(value):
            yield from arrays_of(field_value, array_type)


def make_fingerprint_tape(held: dict | None = None):
    """A wp.Tape that records, after each launch, the fingerprint of every array argument: ``tape.events``
    maps id(array) to [(launch index, "r" | "w", fingerprint)], ``tape.arrays`` id(array) to the array.
    ``held``: id → array of the arrays known before the forward; their fingerprints then (``tape.start``)
    let a launch that changes an array passed in ``inputs=`` be seen writing it. The tape keeps them alive:
    an id is only an identity while its object lives, and forward() may drop and reallocate arrays."""
    from gradcheck.probes.warp_compat import array_class, recording_tape

    array_type = array_class()
    events: dict[int, list] = {}
    arrays: dict[int, object] = {}

    def on_launch(index: int, _kernel: str, inputs, outputs) -> None:
        for kind, group in (("r", inputs), ("w", outputs)):
            for value in group:
                for array in arrays_of(value, array_type):
                    key = id(array)
                    arrays[key] = array
                    events.setdefault(key, []).append((index, kind, fingerprint(array)))

    tape = recording_tape(on_launch)
    tape.events, tape.arrays = events, arrays
    tape.held = dict(held or {})  # alive as long as the tape: no array made during forward can take one of their ids
    tape.start = {key: fingerprint(a) for key, a in tape.held.items()}
    return tape


@dataclass
class _Pair:
    count: int = 0
    changed: int = 0


def analyse(tape, name_of) -> tuple[tuple[Rewrite, ...], tuple[Rewrite, ...]]:
    """Write-after-read instances from the fingerprint events, aggregated per (array, reader, writer).

    A launch reads the arrays passed in ``inputs=``; it writes those in ``outputs=`` and any argument whose
    contents it changed, whichever list it came in (Warp's examples update state in place through
    ``inputs=``; the split is a convention). Only a later launch's write is a rewrite: a fingerprint cannot
    tell a launch that reads an array and updates it in place from one that only accumulates into it
    (``wp.atomic_add``) or overwrites it, and the last two are harmless."""
    from gradcheck.probes.warp_compat import launch_kernel_names, tape_launches

    pairs: dict[tuple[str, str, str], _Pair] = {}
    kernels = launch_kernel_names(tape_launches(tape))
    for key, events in tape.events.items():
        before = tape.start.get(key)
        accesses = []  # (launch, reads, writes, contents it saw, contents it left)
        for i, kind, after in events:
            wrote = kind == "w" or (before is not None and after != before)
            accesses.append((i, kind == "r", wrote, before if before is not None else after, after))
            before = after
        writes = [(i, left) for i, _reads, wrote, _saw, left in accesses if wrote]
        if not writes:
            continue
        for i, reads, _wrote, seen, _left in accesses:
            if not reads:
                continue
            later = next(((j, fp) for j, fp in writes if j > i), None)
            if later is None:
                continue
            j, written = later
            pair = pairs.setdefault((name_of(tape.arrays[key]), kernels[i], kernels[j]), _Pair())
            pair.count += 1
            pair.changed += written != seen
    hazards, identical = [], []
    for (array, reader, writer), pair in pairs.items():
        rewrite = Rewrite(array, reader, writer, pair.count, pair.changed > 0)
        (hazards if pair.changed else identical).append(rewrite)
    return tuple(hazards), tuple(identical)
