"""Nothing of gradcheck's on the program's streams (issue 39 item 6): a warning raised inside gradcheck's own work
(NumPy's "invalid value encountered in subtract" in the per-launch adjoint test, a check's arithmetic) is caught
under every option, --blame included, while the program's own warnings still reach its stderr. Through the real
CLI, beside plain python, since the streams are what is compared."""

from __future__ import annotations

import subprocess
import sys

from conftest import TESTS, cli

PROGRAM = str(TESTS / "programs" / "streams" / "overflowing_blame.py")


def _python(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, PROGRAM, *args], capture_output=True, text=True, timeout=300)


def _lines(text: str) -> list[str]:
    """Output lines, less Warp's start-up banner (its module-load lines and the CUDA-driver notice)."""
    return [line for line in text.splitlines() if line.strip() and "Warp" not in line and not line.startswith(" ")]


def test_blame_keeps_gradcheck_warnings_off_the_program_stderr_and_passes_the_program_own():
    plain = _python()
    audited = cli("exec", "--blame", "--output", "/dev/null", PROGRAM)
    assert plain.returncode == 0 and audited.returncode == 0, audited.stderr
    assert "RuntimeWarning" not in audited.stderr, audited.stderr
    program_stderr = [line for line in _lines(audited.stderr) if "gradcheck" not in line]
    assert program_stderr == _lines(plain.stderr)  # the program's own UserWarning, as under python
    assert any("the program's own warning" in line for line in program_stderr)
    assert sum("at one place" in line for line in program_stderr) == 1  # once per location, as python shows it


def test_under_warnings_as_errors_gradcheck_arithmetic_is_no_internal_error():
    from gradcheck.engine.program_audit import audit_program

    result, run = audit_program(PROGRAM, ["--strict"], blame_at=1)
    assert run.status in (None, 0), run.error
    assert not [f for f in result.findings if f.check == "internal-error"], result.findings
    # the per-launch test ran through its own inf - inf (it failed on the warning turned exception before)
    assert result.blame is not None and result.blame.skipped is None, result.blame
    assert {k.kernel for k in result.blame.kernels} == {"grow", "total"}
