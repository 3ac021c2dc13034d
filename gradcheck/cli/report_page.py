"""``--html DIR`` on run, blame, exec, ci and combine: the report page (formats.html_page) written as
``DIR/index.html``, as coverage.py writes ``htmlcov/index.html``, with a ``.gitignore`` of ``*`` beside it (so the
folder is never committed by accident) when the folder was made for it or was empty.

The folder is checked before anything runs (a file in its place, or a place that cannot be written, is a usage
error, as for ``--output``) and written after the report, whatever the verdict: the page of a failing run is the
one worth opening. A page that cannot be written is one error line and exit 2 (4 when gradcheck could not draw
it), combined with the verdict; the report itself is already out.
"""

from __future__ import annotations

import os
from pathlib import Path

from gradcheck.model.errors import UsageError
from gradcheck.model.exit_codes import ExitCode

PAGE = "index.html"
GITIGNORE = "# Created by gradcheck --html, automatically.\n*\n"


def checked(directory: Path | None, output: Path | None = None, inputs=(), others=None) -> Path | None:
    """``--html DIR`` made absolute (a program under exec may chdir) and checked: a folder that exists or can be
    made, whose ``index.html`` is neither ``--output`` nor another file the command writes (``others``: flag → path,
    ``--graph``, ``--junit``), nor one of the run's inputs, links resolved."""
    if directory is None:
        return None
    directory = Path(os.path.abspath(os.path.expanduser(directory)))
    if directory.is_symlink() and not directory.exists():
        raise UsageError(f"--html {str(directory)!r} is a link to nothing; give a folder for the page")
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"--html {str(directory)!r} is a file; give a folder for the page (it writes {PAGE} there)")
    existing = next((p for p in (directory, *directory.parents) if p.exists()), None)
    if existing is None or not existing.is_dir() or not os.access(existing, os.W_OK):
        raise UsageError(f"cannot write --html {str(directory)!r}; choose a writable folder")
    page = (directory / PAGE).resolve()
    for flag, path in {"--output": output, **(others or {})}.items():
        if path is not None and page == Path(os.path.expanduser(path)).resolve():
            raise UsageError(f"{flag} and --html both name {str(page)!r}; give the {flag[2:]} file another name")
    for source in inputs:
        if page.exists() and Path(source).exists() and os.path.samefile(page, source):
            raise UsageError(f"--html {str(page)!r} is one of this run's inputs; give the page another folder")
    return directory


def write(directory: Path, document, pictures=(), say=None, fail=None) -> ExitCode | None:
    """The page of ``document`` in ``directory``; ``pictures``: the (scenario name, Dataflow | None) the driver
    kept. ``say``/``fail`` print one line (a note, an error). None when it was written; else the exit code its
    failure adds to the verdict (model.exit_codes.combine): a place that cannot be written is the usage error's, a
    page gradcheck could not draw is gradcheck's own failure (never hiding a finding: the report stands)."""
    from gradcheck.cli.output import error_line, write_report_file
    from gradcheck.formats.dot_graph import drawing
    from gradcheck.formats.html_page import PICTURE_NODES, page

    report = document.report if document.KIND == "ci" else document
    findings = {s.name: s.findings for s in report.scenarios}
    fail = fail or error_line
    try:
        drawn = {n: drawing(flow, findings.get(n, ()), PICTURE_NODES) for n, flow in pictures if flow is not None}
        text = page(document, drawn)
    except Exception as exc:  # noqa: BLE001 - the report is already out: one line, not a traceback over it
        fail(f"internal error: the --html page could not be drawn ({type(exc).__name__}: {exc}); the report stands")
        return ExitCode.INTERNAL_ERROR
    try:
        fresh = not directory.is_dir() or not any(directory.iterdir())
        directory.mkdir(parents=True, exist_ok=True)
        write_report_file(directory / PAGE, text)
        ignore = directory / ".gitignore"
        if fresh and not ignore.exists():  # as coverage.py: only in a folder the page has to itself
            ignore.write_text(GITIGNORE, encoding="utf-8")
    except OSError as exc:
        fail(f"cannot write --html {str(directory / PAGE)!r}: {exc.strerror or exc}")
        return ExitCode.USAGE
    if say is not None:
        say(f"wrote the report page to {directory / PAGE}")
    return None
