"""`gradcheck doctor`: what a bug report needs about this installation, and proof the CUDA path compiles.

Users run gradcheck on GPUs; the machines that build it may have none. Warp's NVRTC compiles CUDA kernels without
a driver, so every kernel gradcheck launches itself (gradient statistics, clipping; one per scalar type) is
compiled to PTX for each architecture asked for (``wp.compile_aot_module``): a kernel that does not build for
sm_80 or sm_90 fails here, on a CPU-only machine, before a user meets it.
"""

from __future__ import annotations

import platform
import sys
import tempfile
import time
from pathlib import Path

from gradcheck.model.errors import UsageError

SCHEMA = "gradcheck-doctor/1"
DEFAULT_ARCHS = (80, 90)


def parse_archs(text: str | None) -> tuple[int, ...]:
    """``--cuda-arch``, checked before anything runs: numbers, each one this Warp's NVRTC compiles for. Warp is
    initialised here (its kernel cache checked, ``environment.ready_warp``), so every usage error comes first."""
    archs = DEFAULT_ARCHS
    if text:
        try:
            archs = tuple(int(a.strip().removeprefix("sm_")) for a in text.split(",") if a.strip())
        except ValueError:
            raise UsageError(f"--cuda-arch {text!r} must be numbers such as 80,90") from None
        if not archs or any(a < 50 or a > 200 for a in archs):
            raise UsageError(f"--cuda-arch {text!r} must be compute capabilities such as 80,90")
    unsupported(archs)
    return archs


def unsupported(archs) -> None:
    """A UsageError naming the archs NVRTC cannot compile for, and those it can. Quiet where Warp cannot say
    (no ``wp.get_cuda_supported_archs`` before Warp 1.10, or no NVRTC here): the compile rows then say what fails."""
    from gradcheck.engine.environment import ready_warp

    wp = ready_warp()
    supported_archs = getattr(wp, "get_cuda_supported_archs", None)
    try:
        supported = sorted(int(a) for a in supported_archs()) if supported_archs is not None else []
    except Exception:  # noqa: BLE001 - the check is a courtesy; the compile rows are the evidence
        supported = []
    wrong = [a for a in archs if supported and a not in supported]
    if wrong:
        named = ", ".join(f"sm_{a}" for a in wrong)
        raise UsageError(
            f"--cuda-arch: Warp {wp.__version__}'s NVRTC cannot compile for {named}; "
            f"it supports {','.join(str(a) for a in supported)}"
        )


def gradcheck_kernels() -> list:
    """Every kernel gradcheck launches on its own, for every scalar type it handles."""
    import warp as wp

    from gradcheck.measure.kernels import clamp_kernel, scale_kernel, stats_kernel

    return [
        make(scalar)
        for make in (stats_kernel, scale_kernel, clamp_kernel)
        for scalar in (wp.float16, wp.float32, wp.float64)
    ]


def cuda_compile(archs, keep_in: Path | None = None) -> list[dict]:
    """One row per architecture: kernels compiled to PTX, ok, the first error. ``keep_in``: write the PTX there
    (else a temporary folder)."""
    import warp as wp

    compile_aot = getattr(wp, "compile_aot_module", None)
    kernels = gradcheck_kernels()
    rows = []
    for arch in archs:
        started, error, built = time.perf_counter(), None, 0
        if compile_aot is None:
            error = f"warp-lang {wp.__version__} has no wp.compile_aot_module (Warp >= 1.10 has)"
        else:
            with tempfile.TemporaryDirectory(prefix="gradcheck-ptx-") as scratch:
                folder = str(keep_in) if keep_in is not None else scratch
                for kernel in kernels:
                    try:
                        paths = compile_aot(kernel.module, device=None, arch=[arch], use_ptx=True, module_dir=folder)
                        built += sum(1 for p in paths if Path(p).suffix == ".ptx" and Path(p).stat().st_size > 0)
                    except Exception as exc:  # noqa: BLE001 - the report carries the compiler's message
                        error = error or f"{kernel.key}: {type(exc).__name__}: {str(exc).strip()[:300]}"
        rows.append(
            {
                "arch": arch,
                "kernels": built,
                "of": len(kernels),
                "ok": error is None and built == len(kernels),
                "error": error,
                "seconds": round(time.perf_counter() - started, 2),
            }
        )
    return rows


def _cache_size(cache: Path) -> tuple[int, int]:
    """(files, bytes) of the kernel cache. Another Warp process may be compiling into it now (Warp builds in a
    temporary folder and renames it): an entry that vanishes while it is counted is skipped, never an error."""
    import os

    files = size = 0
    for folder, _dirs, names in os.walk(cache, onerror=lambda _error: None):
        for name in names:
            try:
                size += os.stat(os.path.join(folder, name)).st_size
            except OSError:
                continue
            files += 1
    return files, size


def diagnose(archs=DEFAULT_ARCHS) -> dict:
    import numpy as np
    import warp as wp

    from gradcheck.version import __version__
    from gradcheck.warp_compat import cuda_runtime_info

    wp.init()
    try:
        import newton

        newton_version = getattr(newton, "__version__", "?")
    except Exception as exc:  # noqa: BLE001 - reported, not raised: doctor must run where Newton cannot
        newton_version = f"not importable ({type(exc).__name__})"
    cache = Path(wp.config.kernel_cache_dir or "")
    files, size = _cache_size(cache)
    return {
        "schema": SCHEMA,
        "versions": {
            "gradcheck": __version__,
            "warp": wp.__version__,
            "newton": newton_version,
            "python": platform.python_version(),
            "numpy": np.__version__,
            "platform": f"{platform.system()} {platform.machine()}",
        },
        "devices": [str(d) for d in wp.get_devices()],
        "cuda": cuda_runtime_info() | {"devices": wp.get_cuda_device_count()},
        "kernel_cache": {"path": str(cache), "files": files, "bytes": size},
        "cuda_compile": cuda_compile(archs),
        "python_executable": sys.executable,
    }
