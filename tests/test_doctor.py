"""`gradcheck doctor`: the installation in one report, and gradcheck's own kernels compiled for CUDA (PTX for
sm_80 and sm_90) on this CPU-only machine through Warp's driverless NVRTC.

Each architecture costs a few seconds of NVRTC (nothing is cached): the fast lane compiles sm_80 through the CLI
and sm_90 in this process; the slow lane runs the default, both, through the CLI."""

from __future__ import annotations

import pytest
from conftest import cli, cli_json

from gradcheck.model.exit_codes import ExitCode

GRADCHECK_KERNELS = 9  # the kernels gradcheck launches itself: stats, scale and clamp, each for float16/32/64


def _doctor(*args: str) -> dict | None:
    """``doctor ARGS`` through the CLI, its report checked up to the compile rows; None where this Warp cannot
    compile ahead of time (then the one error row is checked here)."""
    import warp as wp

    proc, data = cli_json("doctor", *args)
    if not hasattr(wp, "compile_aot_module"):
        assert (
            proc.returncode == ExitCode.FINDINGS and "has no wp.compile_aot_module" in data["cuda_compile"][0]["error"]
        )
        return None
    assert proc.returncode == ExitCode.OK, proc.stderr[-2000:]
    assert data["schema"] == "gradcheck-doctor/1"
    assert set(data["versions"]) >= {"gradcheck", "warp", "newton", "python", "numpy"}
    assert "cpu" in data["devices"] and data["kernel_cache"]["path"]
    return data


def _rows(data: dict) -> list[tuple]:
    return [(r["arch"], r["kernels"], r["of"], r["ok"], r["error"]) for r in data["cuda_compile"]]


def test_doctor_reports_versions_devices_and_compiles_every_kernel_for_sm80():
    data = _doctor("--cuda-arch", "80")
    if data is not None:
        assert _rows(data) == [(80, GRADCHECK_KERNELS, GRADCHECK_KERNELS, True, None)]


@pytest.mark.slow  # both architectures through the CLI: the fast lane has sm_80 there and sm_90 below
def test_doctor_compiles_every_kernel_for_sm80_and_sm90_by_default():
    data = _doctor()
    if data is not None:
        assert _rows(data) == [(arch, GRADCHECK_KERNELS, GRADCHECK_KERNELS, True, None) for arch in (80, 90)]


def test_a_list_of_archs_is_read_in_order():
    from gradcheck.engine.doctor import DEFAULT_ARCHS, parse_archs

    assert parse_archs("80,90") == (80, 90) and parse_archs("sm_90, 80") == (90, 80)
    assert parse_archs(None) == DEFAULT_ARCHS == (80, 90)


def test_the_ptx_is_real(tmp_path):
    import warp as wp

    from gradcheck.engine.doctor import cuda_compile

    if not hasattr(wp, "compile_aot_module"):
        pytest.skip("no wp.compile_aot_module on this Warp")
    (row,) = cuda_compile([90], keep_in=tmp_path)
    assert row["ok"]
    ptx = sorted(tmp_path.rglob("*.sm90.ptx"))
    assert len(ptx) == GRADCHECK_KERNELS and all(".target sm_90" in p.read_text() for p in ptx)
    assert any("gradcheck_stats_float16" in p.name for p in ptx)


def test_a_bad_arch_is_a_usage_error():
    proc = cli("doctor", "--cuda-arch", "ninety")
    assert proc.returncode == ExitCode.USAGE and "--cuda-arch 'ninety' must be numbers" in proc.stderr
