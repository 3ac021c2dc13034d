"""The physical limit of a pass's bookkeeping: one read of each param's gradient (BENCHMARKS.md P1w, P6, and the
CUDA rows of bench/gpu_rows.py).

    python bench/read_limit.py SPEC [--set KEY=VALUE ...] [--device cpu]   (prints JSON)

Whatever gradcheck learns about a gradient a pass, it must read it at least once; nothing can cost less than the
bare loop plus that read. A read is timed as half a ``wp.copy`` of the gradient buffer (a copy reads every byte and
writes every byte: twice the traffic of one read), median of ``repeat``, on the scenario's own arrays after
``setup()``; the copy's bandwidth (2 x bytes / seconds) is reported with it, which on a GPU is the device's memory
bandwidth as measured there.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def read_seconds(params: dict, device: str, repeat: int = 7) -> dict:
    """{"floats", "bytes", "copy_s", "read_s", "bandwidth_gbs"} of one read of every gradient in ``params``."""
    import warp as wp

    copy_s, nbytes, floats = 0.0, 0, 0
    for array in params.values():
        grad = array.grad
        if grad is None:
            continue
        target = wp.empty_like(grad)
        wp.copy(target, grad)  # warm: allocation touched, caches as a pass leaves them
        times = []
        for _ in range(repeat):
            wp.synchronize_device(device)
            started = time.perf_counter()
            wp.copy(target, grad)
            wp.synchronize_device(device)
            times.append(time.perf_counter() - started)
        copy_s += statistics.median(times)
        nbytes += grad.capacity
        floats += grad.size * max(1, getattr(grad.dtype, "_length_", 1))
    return {
        "floats": floats,
        "bytes": nbytes,
        "copy_s": copy_s,
        "read_s": copy_s / 2,
        "bandwidth_gbs": 2 * nbytes / copy_s / 1e9 if copy_s else None,
    }


def parse_settings(pairs) -> dict:
    """KEY=VALUE strings as setup() receives them from `gradcheck run --set` (values stay strings)."""
    settings = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"--set {pair!r}: expected KEY=VALUE, e.g. --set scratch=per-step")
        settings[key] = value
    return settings


def measure(spec: str, settings: dict, device: str = "cpu", repeat: int = 7) -> dict:
    """``read_seconds`` on the scenario ``spec`` after ``setup(device, **settings)``."""
    import warp as wp

    from gradcheck.scenario import loader
    from gradcheck.scenario.resolve import resolve

    scenario = loader.load(resolve(spec))
    with wp.ScopedDevice(device):
        scenario.setup(device, **settings)
        return read_seconds(scenario.params(), device, repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("spec")
    parser.add_argument("--set", dest="settings", action="append", metavar="KEY=VALUE", default=[])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(json.dumps(measure(args.spec, parse_settings(args.settings), args.device, args.repeat)))


if __name__ == "__main__":
    main()
