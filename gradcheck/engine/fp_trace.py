"""--trace-nonfinite: re-run a scenario in a subprocess with ``wp.config.verify_fp`` and report the
first operation that produced NaN/Inf.

``verify_fp`` is a compile option: Warp rebuilds the kernels with a check after every operation,
and native code prints ``file:line - op(args)`` for each non-finite result (it never raises).
It prints from native code, so it is captured at the file-descriptor level, in a child process
that cannot disturb the main run or its stdout.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

_OFFENDING = re.compile(r"^(?P<where>\S+:\d+) - (?P<op>\w+\(.*\))\s*$")
TIMEOUT_S = 600


def trace_nonfinite(spec: str, fault: str | None, settings: dict, device: str) -> list[str]:
    """The offending operations verify_fp printed, first first (empty when it printed none)."""
    command = [
        sys.executable,
        "-m",
        "gradcheck.engine.fp_trace",
        json.dumps({"spec": spec, "fault": fault, "settings": dict(settings), "device": device}),
    ]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, env=dict(os.environ))
    except subprocess.TimeoutExpired:
        return [f"(verify_fp re-run timed out after {TIMEOUT_S} s)"]
    found = []
    for line in (proc.stdout + "\n" + proc.stderr).splitlines():
        match = _OFFENDING.match(line.strip())
        entry = f"{os.path.basename(match['where'])}: {match['op']}" if match else None
        if entry and entry not in found:
            found.append(entry)
    return found


def _child(request: dict) -> None:
    import warp as wp

    wp.config.verify_fp = True
    from gradcheck.engine.runner import run_passes
    from gradcheck.scenario import loader
    from gradcheck.scenario.resolve import resolve

    ref = resolve(request["spec"])
    scenario = loader.load(ref)
    run_passes(
        scenario,
        name=loader.scenario_name(scenario, ref),
        device=request["device"],
        passes=1,
        fault=request["fault"],
        options=request["settings"],
    )
    sys.stdout.flush()


if __name__ == "__main__":
    _child(json.loads(sys.argv[1]))
