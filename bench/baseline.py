"""bench/baseline.json: the numbers of the last `make bench`, one record per row key, so the next run can say which
rows got slower (bench/compare.py). Each record carries the date, commit and machine it was measured on: rows
measured alone (`--only ... --update-baseline`) replace their own records and leave the others as they were.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
PATH = HERE / "baseline.json"
FORMAT = 1


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "absent"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine(device: str) -> str:
    """What the numbers depend on, in one line: cores, CPU, Python, Warp, Newton, device."""
    return (
        f"{os.cpu_count()} cores, {_cpu_model()}, {platform.system()} {platform.machine()}, Python "
        f"{platform.python_version()}, warp-lang {_version('warp-lang')}, newton {_version('newton')}, device {device}"
    )


def commit() -> str:
    """The short commit of the checkout, "+dirty" when tracked files differ from it ("unknown" outside git)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--"], cwd=HERE, check=False).returncode != 0
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def load(path: Path = PATH) -> dict[str, dict]:
    """key → record of the previous run; {} when there is no file yet. A file that is not ours is an error that
    names it (a silently ignored baseline would hide every regression)."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        rows = data["rows"]
    except (ValueError, KeyError, TypeError) as exc:
        raise SystemExit(f"{path}: not a benchmark baseline ({exc}); delete it or fix it, then run again") from None
    if not isinstance(rows, dict):
        raise SystemExit(f"{path}: 'rows' must map row keys to records; delete it or fix it, then run again")
    return rows


def stamped(records: dict[str, dict], device: str) -> dict[str, dict]:
    """``records`` with today's date, this checkout's commit and this machine added to each."""
    stamp = {"date": datetime.date.today().isoformat(), "commit": commit(), "machine": machine(device)}
    return {key: {**record, **stamp} for key, record in records.items()}


def save(records: dict[str, dict], path: Path = PATH) -> None:
    """Merge ``records`` (already stamped) over the file's records and write it back, keys sorted."""
    merged = {**load(path), **records}
    text = json.dumps({"format": FORMAT, "rows": dict(sorted(merged.items()))}, indent=1, ensure_ascii=False)
    path.write_text(text + "\n", encoding="utf-8")


def other_machines(previous: dict[str, dict], keys, device: str) -> set[str]:
    """The machines ``previous``'s records of ``keys`` were measured on, other than this one (a warning, not an
    error: ratios within one run travel between machines better than seconds do)."""
    here = machine(device)
    return {previous[k].get("machine", "?") for k in keys if k in previous} - {here}
