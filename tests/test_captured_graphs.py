"""A forward and backward captured in a graph and replayed (wp.ScopedCapture, wp.capture_launch), under
``gradcheck exec``: each replay of a graph that holds a backward is audited as a backward, a replay of a
forward-only graph is none. On CPU (Warp 1.19 captures graphs there) and, where Warp sees one, on a GPU."""

from __future__ import annotations

import functools
import subprocess
import sys

import pytest
from conftest import TESTS, exec_json

from gradcheck.model.exit_codes import ExitCode
from gradcheck.model.findings import Severity

PROGRAM = str(TESTS / "programs" / "exec" / "captured_training.py")


@functools.cache
def _cpu_captures() -> str | None:
    import warp as wp

    wp.init()
    try:
        with wp.ScopedCapture(device="cpu"):
            pass
    except Exception as exc:  # noqa: BLE001 - older Warps capture graphs on CUDA only
        return f"Warp {wp.config.version} does not capture graphs on CPU: {exc}"
    return None


def _cuda() -> str | None:
    import warp as wp

    wp.init()
    return None if wp.get_cuda_device_count() else "no CUDA device"


DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param("cuda:0", id="cuda"),
]


def _skip_unless(device: str) -> None:
    reason = _cpu_captures() if device == "cpu" else _cuda()
    if reason:
        pytest.skip(reason)


def _exec(*args: str):
    return exec_json(PROGRAM, *args)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("capture", ["both", "forward"])
def test_replayed_backwards_are_audited_and_a_clean_loop_is_silent(device, capture):
    _skip_unless(device)
    proc, scenario = _exec("--capture", capture, "--device", device, "--iterations", "5")
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
    assert "loss" in proc.stdout  # the program's own output, then the report
    assert scenario["passes"] == 5  # five backwards: the five replays, or the five backwards after them
    assert scenario["device"].startswith(device.split(":")[0])
    assert [(p["subject"], p["role"]) for p in scenario["params"]] == [("x.grad", "updated")]
    assert [f for f in scenario["findings"] if f["severity"] != "info"] == []
    (note,) = [n for n in scenario["notes"] if "graph replay" in n]
    if capture == "both":
        assert note.startswith("5 graph replay(s) (wp.capture_launch): 5 audited as a backward")
    else:
        assert "0 audited" in note and "5 ran a graph with no backward captured in it" in note


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("capture", ["both", "forward"])
def test_a_replayed_backward_onto_unzeroed_gradients_is_accumulation(device, capture):
    _skip_unless(device)
    proc, scenario = _exec("--capture", capture, "--mistake", "no-zero", "--device", device, "--iterations", "4")
    assert proc.returncode == ExitCode.FINDINGS, proc.stderr[-3000:]
    loud = {(f["check"], f["severity"], f["subject"]) for f in scenario["findings"] if f["severity"] != "info"}
    assert ("accumulation", "error", "x.grad") in loud
    (accumulation,) = [f for f in scenario["findings"] if f["check"] == "accumulation"]
    # the line that ran the backward: the replay, or the backward after it
    line = "wp.capture_launch(graph)" if capture == "both" else "tape.backward(loss)"
    site = accumulation["message"].split("captured_training.py:")[1].split(")")[0]
    assert open(PROGRAM).read().splitlines()[int(site) - 1].strip() == line


@pytest.mark.parametrize("device", DEVICES)
# a forward captured with its backward is replayed the same way: the long lane's (two more program pairs)
@pytest.mark.parametrize("capture", [pytest.param("both", marks=pytest.mark.slow), "forward"])
@pytest.mark.parametrize(
    ("mistake", "subject", "launches"),
    [
        ("shared-scratch", "scratch", "weigh → scaled_square"),
        ("stale-read", "control", "next_control_cost → set_control"),  # as Newton's drone cost reads its controls
    ],
)
def test_a_write_after_read_in_a_captured_forward_is_found(device, capture, mistake, subject, launches):
    """Launches recorded while a graph is captured run in no Python call gradcheck could watch: the forward is
    replayed from copies just before a replay of its graph, from the state that replay starts from (a stale read
    is stale only then), and the program's arrays restored. On CUDA before the second replay: the graph's own
    memory is mapped once it has run."""
    _skip_unless(device)
    args = ["--capture", capture, "--mistake", mistake, "--device", device]
    proc, scenario = _exec(*args)
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]  # a warning does not fail --fail-on error
    plain = subprocess.run([sys.executable, PROGRAM, *args], capture_output=True, text=True, timeout=300)
    assert plain.stdout.splitlines()[-1] in proc.stdout.splitlines()  # the replay changed nothing the program computes
    loud = [(f["check"], f["severity"], f["subject"]) for f in scenario["findings"] if f["severity"] != "info"]
    assert loud == [("write-after-read", "warning", subject)], scenario["notes"]
    assert launches in scenario["findings"][0]["message"]


def test_a_capture_made_between_audited_windows_is_still_watched():
    """Between audited windows the recording hooks are off (warp_compat.hooks.TapeSwitch): a capture that starts
    there turns them on (``wp.capture_begin``), so the forward recorded into the graph is still its graph's and a
    write-after-read in it is found at the next audited replay (it was missed when the capture was not told)."""
    _skip_unless("cpu")
    from conftest import audited

    args = ["--capture", "forward", "--device", "cpu", "--warmup", "10", "--iterations", "30"]
    found = audited(PROGRAM, *args, "--mistake", "shared-scratch", cadence=(2, 16)).findings
    assert [(f.check, f.subject) for f in found if f.severity > Severity.INFO] == [("write-after-read", "scratch")]
    clean = audited(PROGRAM, *args, cadence=(2, 16)).findings
    assert [f for f in clean if f.severity > Severity.INFO] == []
