"""Fingerprints of an array's values: a CRC that says "changed since" without keeping a copy.

Several watchers need to know whether an array still holds what it held at an earlier moment (a launch's input
before backward, a recorded argument before the next launch, a leaf before a test reads it) across arrays far too
many to copy. A CRC of the values answers that in one pass over the memory.
"""

from __future__ import annotations

import zlib


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


def bytes_crc(array) -> int:
    """CRC of the array's bytes: a changed byte is a new copy (-0.0 over 0.0 too: one copy more, never one less).
    On the CPU a view of the memory, no copy: the recorder asks before every launch of every argument."""
    return values_crc(array.numpy())


def values_crc(values) -> int:
    """``bytes_crc`` of values already read (a NumPy array): a view of contiguous ones, no copy."""
    import numpy as np

    if not values.flags.c_contiguous:
        values = np.ascontiguousarray(values)
    return zlib.crc32(values.view(np.uint8).reshape(-1)) if values.size else 0
