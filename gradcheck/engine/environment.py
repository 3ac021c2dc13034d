"""The environment block of a report (versions and the device, so a report can be reproduced), and Warp made
ready for a command: initialised, its kernel cache usable, the device known."""

from __future__ import annotations

import os
import platform
import sys

from gradcheck.model.errors import UsageError


def describe(device: str | None) -> dict:
    from gradcheck.version import __version__

    env = {
        "gradcheck": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "device": device,
    }
    for module in ("warp", "newton"):
        if module in sys.modules:
            env[module] = getattr(sys.modules[module], "__version__", "?")
    return env


def default_device() -> str:
    """``cuda:0`` when Warp sees a GPU, else ``cpu``."""
    wp = ready_warp()
    return "cuda:0" if wp.get_cuda_device_count() > 0 else "cpu"


def check_device(name: str) -> str:
    """The device name as Warp spells it, or a UsageError that says what is available."""
    wp = ready_warp()
    try:
        return str(wp.get_device(name))
    except Exception:
        available = ", ".join(str(d) for d in wp.get_devices()) or "none"
        raise UsageError(f"device {name!r} is not available here; available: {available} (use --device cpu)") from None


_CACHE_WRITABLE: set[str] = set()  # kernel caches already shown writable in this process


def ready_warp():
    """Warp, imported and initialised, before anything runs; a kernel cache Warp cannot create or write to
    (``WARP_CACHE_PATH`` naming a file, a read-only folder, a place that cannot be made) is a UsageError naming the
    path and the fix, not a traceback from the first kernel build."""
    from gradcheck.warp_compat import load_warp

    try:
        wp = load_warp()
    except OSError as exc:
        problem = kernel_cache_problem(exc)
        if problem is None:
            raise
        raise UsageError(problem) from None
    problem = kernel_cache_problem()
    if problem is not None:
        raise UsageError(problem)
    return wp


def kernel_cache_problem(error: OSError | None = None) -> str | None:
    """Why Warp cannot use its kernel cache, as one line naming the path and the fix, or None. ``error``: what
    Warp's initialisation raised (None: test the cache by writing a file into it); None when it is not the cache's.
    Reads ``wp.config.kernel_cache_dir`` (set by Warp's initialisation, even by one that failed), else
    ``WARP_CACHE_PATH``; Warp must be imported already."""
    import warp as wp

    path = getattr(wp.config, "kernel_cache_dir", None) or os.environ.get("WARP_CACHE_PATH")
    if not path:
        return None
    if error is None:
        error = _write_test(str(path))
        if error is None:
            return None
    elif not _about(error, str(path)):
        return None
    reason = error.strerror or str(error)
    if error.filename and os.path.realpath(str(error.filename)) != os.path.realpath(path):
        reason += f" ({str(error.filename)!r})"
    env = os.environ.get("WARP_CACHE_PATH")
    fix = (
        f"point WARP_CACHE_PATH (now {env!r}) at a writable directory, or unset it for Warp's default"
        if env
        else "make it writable, or set WARP_CACHE_PATH to a writable directory"
    )
    return f"Warp's kernel cache {str(path)!r} cannot be used: {reason}; {fix}"


def _write_test(path: str) -> OSError | None:
    """What creating the cache folder (as Warp does) and a file in it raised, or None."""
    import tempfile

    if path in _CACHE_WRITABLE:
        return None
    try:
        os.makedirs(path, exist_ok=True)
        handle, probe = tempfile.mkstemp(dir=path, prefix=".gradcheck-write-test-")
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        return exc
    _CACHE_WRITABLE.add(path)
    return None


def _about(error: OSError, path: str) -> bool:
    """Whether ``error`` is about ``path`` or a folder on its way (``/proc/nope`` for ``/proc/nope/1.19.0``)."""
    if not error.filename:
        return False
    named, cache = os.path.realpath(str(error.filename)), os.path.realpath(path)
    return cache == named or cache.startswith(named.rstrip(os.sep) + os.sep) or named.startswith(cache + os.sep)
