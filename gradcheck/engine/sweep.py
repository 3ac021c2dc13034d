"""`gradcheck sweep`: the finite-difference error of one scenario as one option varies.

    gradcheck sweep cartpole --set steps=10,100,300,600 [--set scratch=per-step] [--plot err.png]

Each value runs one pass and the fast FD check (no element fallback, no reentrancy probe); the table
gives the worst relative error of the directional derivatives per value. On stock Newton cartpole it
grows with the horizon; with per-step scratch it stays near the float32 floor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gradcheck.model.errors import UsageError


@dataclass(frozen=True)
class SweepRow:
    value: str
    error: float | None  # worst directional relative error
    severity: str  # "ok" | "warning" | "error" | "failed"
    seconds: float
    detail: str = ""

    def to_dict(self) -> dict:
        return {
            "value": self.value,
            "fd_rel_error": self.error if self.error is not None and math.isfinite(self.error) else None,
            "verdict": self.severity,
            "seconds": round(self.seconds, 3),
            "detail": self.detail,
        }


def split_sweep(settings: dict[str, str]) -> tuple[str, list[str], dict[str, str]]:
    """(swept key, its values, the fixed settings); exactly one setting may hold a comma list."""
    swept = [k for k, v in settings.items() if "," in v]
    if len(swept) != 1:
        raise UsageError(
            "sweep needs exactly one --set KEY=V1,V2,... with comma-separated values "
            f"(got {len(swept)}: {', '.join(swept) or 'none'})"
        )
    key = swept[0]
    values = [v.strip() for v in settings[key].split(",") if v.strip()]
    fixed = {k: v for k, v in settings.items() if k != key}
    return key, values, fixed


def run_sweep(spec: str, settings: dict[str, str], device: str | None, fault: str | None = None, progress=None):
    """(option, rows, device, Interrupted or None): one row per value, in order; on Ctrl-C the rows so far."""
    from gradcheck.engine.environment import check_device, default_device
    from gradcheck.engine.interrupts import Interrupted, watch
    from gradcheck.engine.scenario_run import preflight
    from gradcheck.model.options import FDOptions

    key, values, fixed = split_sweep(settings)
    fd = FDOptions(auto_elements=False)
    device = check_device(device) if device else default_device()
    rows: list[SweepRow] = []
    try:
        with watch():
            # an unknown scenario, fault or option: one usage error before any value runs, not one failed row each
            preflight([(spec, fault, {**fixed, key: values[0] if values else ""}, None)])
            for value in values:
                rows.append(_row(spec, {**fixed, key: value}, value, fault, device, fd, progress))
    except Interrupted as exc:
        return key, rows, device, exc
    return key, rows, device, None


def _row(spec: str, settings: dict, value: str, fault, device: str, fd, progress) -> SweepRow:
    from gradcheck.engine.scenario_run import run_one
    from gradcheck.model.exit_codes import ExitCode
    from gradcheck.model.options import BlameMode, RunOptions

    # the sweep charts the finite-difference error: no reentrancy or blame probes
    options = RunOptions(
        device=device, passes=1, fault=fault, settings=settings, fd=fd, replay=False, blame=BlameMode.off
    )
    result = run_one(spec, options, device, progress)
    if result.error and result.error_code == ExitCode.USAGE:  # setup() rejected this value: the user's input,
        return SweepRow(value, None, "rejected", result.seconds, result.error)  # and the other values' rows stand
    if result.error:
        return SweepRow(value, None, "failed", result.seconds, result.error)
    found = [f for f in result.findings if f.check == "fd-mismatch"]
    skipped = result.fd.skipped if result.fd else None
    error = result.fd.max_direction_error if result.fd else None
    verdict = found[0].severity.label if found else ("skipped" if skipped else "ok")
    return SweepRow(value, error, verdict, result.seconds, skipped or "")


def plot(path: str, spec: str, key: str, series: dict[str, list[SweepRow]]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("--plot needs matplotlib: pip install 'gradcheck[plot]'") from None
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, rows in series.items():
        xs = [float(r.value) for r in rows if r.error is not None]
        ys = [max(r.error, 1e-9) for r in rows if r.error is not None]
        ax.plot(xs, ys, marker="o", label=label)
    ax.set_xlabel(key)
    ax.set_ylabel("FD relative error (directional, worst of k)")
    ax.set_yscale("log")
    ax.set_title(f"gradcheck sweep {spec}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
