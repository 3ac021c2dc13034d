"""The launcher a ``gradcheck exec`` process runs under (torchrun, ``python -m torch.distributed.run``, SLURM's srun),
read from the environment it sets for each rank, and what changes for a rank.

A launcher starts one process per rank and judges each by its exit status: a failing rank tears the others down,
and an elastic launcher restarts them all (``--max-restarts``). So under one, ``gradcheck exec`` keeps the rank's
exit status the program's own (a finding must never look like a crash), and the verdict's exit code comes from
``gradcheck combine`` over the ranks' reports. Several processes share one command line, so each rank writes its
own report: ``--output`` may name the rank with placeholders (``{rank}``, ``{local_rank}``, ``{world_size}``,
``{restart}``), and a path without ``{rank}`` gets ``.rank<R>`` (and ``.restart<K>`` after an elastic restart)
before its extension, as coverage.py suffixes its parallel data files: no two processes ever write one file, and an
attempt that was restarted keeps its report. Without ``--output``, a rank writes ``gradcheck-report.rank<R>.json``
in the working directory and nothing on stdout (the program's output stays what it would be without gradcheck).

What torchrun sets (torch.distributed.run, measured on torch 2.13): ``TORCHELASTIC_RUN_ID``, ``RANK``,
``LOCAL_RANK``, ``WORLD_SIZE``, ``TORCHELASTIC_RESTART_COUNT``. srun: ``SLURM_PROCID``, ``SLURM_LOCALID``,
``SLURM_NTASKS``, ``SLURM_STEP_ID`` (absent in the batch script itself, which is not a rank), ``SLURM_RESTART_COUNT``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DEFAULT_OUTPUT = "gradcheck-report.json"
PLACEHOLDERS = ("rank", "local_rank", "world_size", "restart")


@dataclass(frozen=True)
class Launch:
    """One rank of a launched job."""

    launcher: str  # "torchrun" | "slurm"
    rank: int
    local_rank: int
    world_size: int
    restart: int  # the elastic restart this attempt is (0: the first)

    def environment(self) -> dict[str, str]:
        """What a rank's report says of its launch (its ``environment``: keys added, none renamed)."""
        return {"launcher": self.launcher, "rank": str(self.rank), "local_rank": str(self.local_rank),
                "world_size": str(self.world_size), "restart": str(self.restart)}  # fmt: skip

    def output(self, path: Path | None) -> Path:
        """This rank's report file for ``--output path`` (None: the default, in the working directory)."""
        given = str(path) if path is not None else os.path.abspath(DEFAULT_OUTPUT)
        values = {name: str(getattr(self, name)) for name in PLACEHOLDERS}
        result = Path(re.sub(r"\{(" + "|".join(PLACEHOLDERS) + r")\}", lambda m: values[m.group(1)], given))
        suffix = "" if "{rank}" in given else f".rank{self.rank}"
        if self.restart and "{restart}" not in given:
            suffix += f".restart{self.restart}"
        return result.with_name(result.stem + suffix + result.suffix)


def current(environ: Mapping[str, str] | None = None) -> Launch | None:
    """The launch this process is a rank of, or None (a plain run)."""
    env = os.environ if environ is None else environ
    if "TORCHELASTIC_RUN_ID" in env and "RANK" in env:
        return _launch("torchrun", env, "RANK", "LOCAL_RANK", "WORLD_SIZE", "TORCHELASTIC_RESTART_COUNT")
    if "SLURM_PROCID" in env and "SLURM_STEP_ID" in env:
        return _launch("slurm", env, "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_RESTART_COUNT")
    return None


def _launch(launcher: str, env: Mapping[str, str], rank: str, local: str, world: str, restart: str) -> Launch | None:
    try:
        return Launch(
            launcher, int(env[rank]), int(env.get(local, "0")), int(env.get(world, "1")), int(env.get(restart, "0"))
        )
    except ValueError:  # not a launcher's numbers: a plain run
        return None
