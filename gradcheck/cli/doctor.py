"""`gradcheck doctor`: versions, devices, CUDA driver and NVRTC, the kernel cache, and gradcheck's own kernels
compiled to PTX for each --cuda-arch (no GPU needed). Paste its output into bug reports."""

from __future__ import annotations

from pathlib import Path

import typer

from gradcheck.cli.output import check_writable, stdout_to_stderr
from gradcheck.cli.reporting import OUTPUT, deliver, format_option, usage_exit
from gradcheck.formats import OutputFormat, check_supported
from gradcheck.model.errors import UsageError


def doctor(
    fmt: OutputFormat = format_option("doctor"),
    output: Path = OUTPUT,
    cuda_arch: str = typer.Option("80,90", "--cuda-arch", help="compute capabilities to compile for, e.g. 80,90"),
) -> None:
    """Versions, devices, CUDA driver and NVRTC, kernel cache; gradcheck's kernels compiled to PTX per arch."""
    from gradcheck.engine.doctor import diagnose, parse_archs
    from gradcheck.model.documents import DoctorDoc

    try:
        check_supported("doctor", fmt)
        check_writable(output)
        archs = parse_archs(cuda_arch)
        with stdout_to_stderr():
            document = DoctorDoc(diagnose(archs))
    except UsageError as exc:
        raise usage_exit("doctor", exc, fmt, output) from None
    deliver(document, fmt, output)
    raise typer.Exit(int(document.exit_code))
