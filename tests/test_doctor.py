"""`gradcheck doctor`: the installation in one report, and gradcheck's own kernels compiled for CUDA (PTX for
sm_80 and sm_90) on this CPU-only machine through Warp's driverless NVRTC."""

from __future__ import annotations

import pytest
from conftest import cli, cli_json

from gradcheck.model.exit_codes import ExitCode


def test_doctor_reports_versions_devices_and_compiles_every_kernel_for_sm80_and_sm90():
    import warp as wp

    proc, data = cli_json("doctor", "--cuda-arch", "80,90")
    if not hasattr(wp, "compile_aot_module"):
        assert (
            proc.returncode == ExitCode.FINDINGS and "has no wp.compile_aot_module" in data["cuda_compile"][0]["error"]
        )
        return
    assert proc.returncode == ExitCode.OK, proc.stderr[-2000:]
    assert data["schema"] == "gradcheck-doctor/1"
    assert set(data["versions"]) >= {"gradcheck", "warp", "newton", "python", "numpy"}
    assert "cpu" in data["devices"] and data["kernel_cache"]["path"]
    assert [(r["arch"], r["kernels"], r["of"], r["ok"], r["error"]) for r in data["cuda_compile"]] == [
        (80, 9, 9, True, None),
        (90, 9, 9, True, None),
    ]


def test_the_ptx_is_real(tmp_path):
    import warp as wp

    from gradcheck.engine.doctor import cuda_compile

    if not hasattr(wp, "compile_aot_module"):
        pytest.skip("no wp.compile_aot_module on this Warp")
    (row,) = cuda_compile([90], keep_in=tmp_path)
    assert row["ok"]
    ptx = sorted(tmp_path.rglob("*.sm90.ptx"))
    assert len(ptx) == 9 and all(".target sm_90" in p.read_text() for p in ptx)
    assert any("gradcheck_stats_float16" in p.name for p in ptx)


def test_a_bad_arch_is_a_usage_error():
    proc = cli("doctor", "--cuda-arch", "ninety")
    assert proc.returncode == ExitCode.USAGE and "--cuda-arch 'ninety' must be numbers" in proc.stderr
