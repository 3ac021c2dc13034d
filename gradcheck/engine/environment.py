"""The environment block of a report: versions and the device, so a report can be reproduced."""

from __future__ import annotations

import platform
import sys


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
    from gradcheck.probes.warp_compat import load_warp

    wp = load_warp()
    return "cuda:0" if wp.get_cuda_device_count() > 0 else "cpu"


def check_device(name: str) -> str:
    """The device name as Warp spells it, or a UsageError that says what is available."""
    from gradcheck.model.errors import UsageError
    from gradcheck.probes.warp_compat import load_warp

    wp = load_warp()
    try:
        return str(wp.get_device(name))
    except Exception:
        available = ", ".join(str(d) for d in wp.get_devices()) or "none"
        raise UsageError(f"device {name!r} is not available here; available: {available} (use --device cpu)") from None
