"""The spring chain (all its faults) in a process where a check of gradcheck's raises: for ``gradcheck ci``, whose
entries run in worker processes of their own, so a test's monkeypatch cannot reach them. Imported only there."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from raising_check import plant  # noqa: E402

from gradcheck.scenarios.spring_chain import SpringChain  # noqa: E402

plant()

scenario = SpringChain
