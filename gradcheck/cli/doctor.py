"""`gradcheck doctor`: versions, devices, CUDA driver and NVRTC, the kernel cache, and gradcheck's own kernels
compiled to PTX for each --cuda-arch (no GPU needed). Paste its output into bug reports."""

from __future__ import annotations

import json

import typer

from gradcheck.cli.output import console, fail, stdout_to_stderr
from gradcheck.formats import OutputFormat
from gradcheck.model.errors import UsageError
from gradcheck.model.exit_codes import ExitCode


def doctor(
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", help="table or json"),
    cuda_arch: str = typer.Option("80,90", "--cuda-arch", help="compute capabilities to compile for, e.g. 80,90"),
) -> None:
    """Versions, devices, CUDA driver and NVRTC, kernel cache; gradcheck's kernels compiled to PTX per arch."""
    from gradcheck.engine.doctor import diagnose, parse_archs

    try:
        archs = parse_archs(cuda_arch)
    except UsageError as exc:
        raise fail(exc) from None
    with stdout_to_stderr():
        report = diagnose(archs)
    failed = [row for row in report["cuda_compile"] if not row["ok"]]
    if fmt == OutputFormat.json:
        typer.echo(json.dumps(report, indent=2))
    else:
        out = console()
        versions = ", ".join(f"{k} {v}" for k, v in report["versions"].items())
        out.print(f"gradcheck doctor — {versions}")
        cuda = report["cuda"]
        out.print(
            f"devices: {', '.join(report['devices'])}; CUDA devices: {cuda['devices']}; driver: "
            f"{cuda['driver'] or 'not available'}; toolkit (NVRTC): {cuda['toolkit'] or 'not available'}"
        )
        cache = report["kernel_cache"]
        out.print(f"kernel cache: {cache['path']} ({cache['files']} files, {cache['bytes'] / 2**20:.1f} MiB)")
        for row in report["cuda_compile"]:
            verdict = "ok" if row["ok"] else f"FAILED: {row['error']}"
            out.print(
                f"cuda_compile sm_{row['arch']}: {row['kernels']}/{row['of']} gradcheck kernels to PTX in "
                f"{row['seconds']:.1f} s — {verdict}",
                markup=False,
            )
    raise typer.Exit(int(ExitCode.FINDINGS if failed else ExitCode.OK))
