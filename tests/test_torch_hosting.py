"""Under ``gradcheck exec`` a PyTorch program behaves exactly as under ``python``: the same stdout byte for byte,
the same stderr (but for gradcheck's own closing line when the program failed), the mapped exit status, and a
report that parses. Shown on programs nobody here wrote (Warp's own PyTorch example and its PyTorch interop test
module, unmodified) and on ours. Timings Warp and unittest print are the only thing normalised.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="torch is an optional extra: `make test-torch` runs these tests")

from conftest import TESTS  # noqa: E402

DEADLINE = 300
PROGRAMS = TESTS / "programs" / "torch"


def _warp_file(relative: str) -> str:
    import warp

    return str(Path(warp.__file__).parent / relative)


CASES = {
    "warp-example-torch": lambda: (_warp_file("examples/core/example_torch.py"), "--headless", "--num-frames", "3"),
    "warp-interop-test-module": lambda: ("-m", "warp.tests.interop.test_torch"),
    "shipped-example": lambda: ("-m", "gradcheck.examples.torch_warp_train", "--steps", "6"),
    "shipped-example-with-a-fault": lambda: ("-m", "gradcheck.examples.torch_warp_train", "--fault", "tape-reused"),
    "pure-torch-nan": lambda: (str(PROGRAMS / "pure_train.py"), "--case", "nan"),
    "pure-torch-bad-argument": lambda: (str(PROGRAMS / "pure_train.py"), "--case", "no-such-case"),
}

_TIMINGS = [
    (re.compile(rb"took [\d.]+ ms\s+\((compiled|cached)\)"), b"took T ms"),
    (re.compile(rb"in [\d.]+s\b"), b"in Ts"),
]


def _normal(data: bytes) -> bytes:
    for pattern, replacement in _TIMINGS:
        data = pattern.sub(replacement, data)
    return data


def _pair(args: tuple[str, ...], folder: Path):
    env = {**os.environ, "WARP_DEVICE": "cpu", "PYTHONHASHSEED": "0"}
    env.pop("FORCE_COLOR", None)
    run = dict(capture_output=True, cwd=str(folder), env=env, timeout=DEADLINE, stdin=subprocess.DEVNULL)
    plain = subprocess.run([sys.executable, *args], **run)
    report = folder / "report.json"
    hosted = subprocess.run(
        [sys.executable, "-m", "gradcheck", "exec", "--format", "json", "--output", str(report), *args], **run
    )
    return plain, hosted, report


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    folders = {name: tmp_path_factory.mktemp(name) for name in CASES}
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {name: pool.submit(_pair, CASES[name](), folders[name]) for name in CASES}
    return {name: f.result() for name, f in futures.items()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_program_runs_as_under_python(pairs, name):
    plain, hosted, report = pairs[name]
    assert _normal(hosted.stdout) == _normal(plain.stdout)
    added = _normal(hosted.stderr)[len(_normal(plain.stderr)) :]
    assert _normal(hosted.stderr).startswith(_normal(plain.stderr)), hosted.stderr[-3000:]
    if plain.returncode == 0:
        assert hosted.returncode in (0, 1) and added == b"", added
    else:
        assert hosted.returncode == 3
        assert all(line.startswith(b"gradcheck: error: ") for line in added.strip().splitlines()), added
    (scenario,) = json.loads(report.read_text())["scenarios"]
    assert scenario["name"]
    if plain.returncode != 0:
        assert f"status {plain.returncode}" in scenario["error"]


def test_the_third_party_programs_are_audited_on_the_torch_side(pairs):
    _plain, _hosted, report = pairs["warp-example-torch"]
    (scenario,) = json.loads(report.read_text())["scenarios"]
    assert scenario["passes"] == 3 and scenario["findings"] == []
    assert [p["subject"] for p in scenario["params"]] == ["example.xy.grad"]
    assert not [n for n in scenario["notes"] if "never called tape.backward" in n]
