"""What the observer reads off an array: a fingerprint of its bytes, device checksums and norms.

Gradient and parameter values are read with the device statistics kernel (gradcheck.measure.stats: a few scalars per
buffer reach the host); fingerprints of arbitrary arguments (ints, structs) with a CRC of their bytes. An array
whose memory the program may have freed (gradcheck.measure.liveness) is not read: None (checksum, fingerprint), NaN
(norm), or left out (the dicts): whoever compares values treats that as "not checked", never as "changed".
"""

from __future__ import annotations


def fingerprint(array) -> int | None:
    from gradcheck.measure.liveness import readable_fingerprint

    return readable_fingerprint(array)


def checksum(array, device=None) -> int | None:
    """Bit-exact checksum: on the device for float arrays (and arrays of all-float structs), a CRC of the bytes
    otherwise."""
    from gradcheck.measure.liveness import readable
    from gradcheck.measure.stats import gradient_stats
    from gradcheck.warp_compat import has_float_values

    if not readable(array):
        return None
    if has_float_values(array):
        return gradient_stats([array], device=device)[0].checksum
    return fingerprint(array)


def checksums(arrays) -> dict[int, int]:
    """id(array) → checksum, for the float arrays among ``arrays`` (one launch for all of them)."""
    from gradcheck.measure.liveness import readable
    from gradcheck.measure.stats import gradient_stats
    from gradcheck.warp_compat import has_float_values

    floats = [a for a in arrays if has_float_values(a) and readable(a)]
    return {id(a): s.checksum for a, s in zip(floats, gradient_stats(floats))} if floats else {}


def norm(array, device=None) -> float:
    """L2 norm over the finite values (NaN for a non-float array)."""
    from gradcheck.measure.liveness import readable
    from gradcheck.measure.stats import gradient_stats
    from gradcheck.warp_compat import has_float_values

    if not has_float_values(array) or not readable(array):
        return float("nan")
    return gradient_stats([array], device=device)[0].norm


def norms(arrays, device=None) -> dict[int, float]:
    """id(array) → L2 norm of its values, for the float arrays among ``arrays`` (one launch for all of them)."""
    from gradcheck.measure.liveness import readable
    from gradcheck.measure.stats import gradient_stats
    from gradcheck.warp_compat import has_float_values

    floats = [a for a in arrays if has_float_values(a) and readable(a)]
    return {id(a): s.norm for a, s in zip(floats, gradient_stats(floats, device=device))} if floats else {}


def scalar(loss) -> float | None:
    try:
        if loss is not None and loss.size == 1:
            return float(loss.numpy().reshape(-1)[0])
    except Exception:  # noqa: BLE001 - a loss of a type gradcheck cannot read is not reported
        return None
    return None


def dtype_name(dtype) -> str:
    return getattr(dtype, "__name__", None) or str(dtype)
