"""Shared helpers: run scenarios in-process (fast) or through the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
SCENARIOS = TESTS / "scenarios"
ROOT = TESTS.parent


def run_scenario(spec: str, fault: str | None = None, passes: int = 5, **settings):
    """One scenario through the whole pipeline on CPU; returns (ScenarioResult, Report)."""
    from gradcheck.pipeline import RunOptions, run

    report = run([spec], RunOptions(device="cpu", passes=passes, fault=fault, settings=settings))
    return report.scenarios[0], report


def cli(*args: str, env: dict | None = None, cwd: Path | None = None, timeout: float = 600):
    """The real CLI in a subprocess, like a user or CI would run it (no TTY)."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("FORCE_COLOR", None)
    return subprocess.run(
        [sys.executable, "-m", "gradcheck", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=str(cwd or ROOT),
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def cli_json(*args: str, **kwargs):
    proc = cli(*args, "--format", "json", **kwargs)
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(
            f"stdout is not JSON (exit {proc.returncode}):\n{proc.stdout[:2000]}\nstderr:\n{proc.stderr[-2000:]}"
        )
    return proc, data


def by_check(findings, check: str):
    return [f for f in findings if (f.check if hasattr(f, "check") else f["check"]) == check]
