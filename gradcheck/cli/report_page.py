"""``--html DIR`` on run, blame, exec, ci and combine: the report page (formats.html_page) written as
``DIR/index.html``, as coverage.py writes ``htmlcov/index.html``, with a ``.gitignore`` of ``*`` beside it (so the
folder is never committed by accident) when the folder has none.

The folder is checked before anything runs (a file in its place, or a place that cannot be written, is a usage
error, as for ``--output``) and written after the report, whatever the verdict: the page of a failing run is the
one worth opening. A page that cannot be written is one error line and exit 2; the report itself is already out.
"""

from __future__ import annotations

import os
from pathlib import Path

from gradcheck.model.errors import UsageError

PAGE = "index.html"
GITIGNORE = "# Created by gradcheck --html, automatically.\n*\n"


def checked(directory: Path | None, output: Path | None = None, inputs=()) -> Path | None:
    """``--html DIR`` made absolute (a program under exec may chdir) and checked: a folder that exists or can be
    made, whose ``index.html`` is neither ``--output`` nor one of the run's inputs."""
    if directory is None:
        return None
    directory = Path(os.path.abspath(os.path.expanduser(directory)))
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"--html {str(directory)!r} is a file; give a folder for the page (it writes {PAGE} there)")
    existing = next((p for p in (directory, *directory.parents) if p.exists()), None)
    if existing is None or not os.access(existing, os.W_OK):
        raise UsageError(f"cannot write --html {str(directory)!r}; choose a writable folder")
    page = directory / PAGE
    if output is not None and page == Path(os.path.abspath(os.path.expanduser(output))):
        raise UsageError(f"--output and --html both name {str(page)!r}; give the report another file")
    for source in inputs:
        if page.exists() and Path(source).exists() and os.path.samefile(page, source):
            raise UsageError(f"--html {str(page)!r} is one of this run's inputs; give the page another folder")
    return directory


def write(directory: Path, document, pictures=(), say=None, fail=None) -> bool:
    """The page of ``document`` in ``directory``; ``pictures``: the (scenario name, Dataflow | None) the driver
    kept. ``say``/``fail`` print one line (a note, an error). False when it could not be written (exit 2)."""
    from gradcheck.cli.output import error_line, write_report_file
    from gradcheck.formats.dot_graph import drawing
    from gradcheck.formats.html_page import page

    report = document.report if document.KIND == "ci" else document
    findings = {s.name: s.findings for s in report.scenarios}
    drawn = {name: drawing(flow, findings.get(name, ())) for name, flow in pictures if flow is not None}
    fail = fail or error_line
    try:
        directory.mkdir(parents=True, exist_ok=True)
        write_report_file(directory / PAGE, page(document, drawn))
        ignore = directory / ".gitignore"
        if not ignore.exists():
            ignore.write_text(GITIGNORE, encoding="utf-8")
    except OSError as exc:
        fail(f"cannot write --html {str(directory / PAGE)!r}: {exc.strerror or exc}")
        return False
    if say is not None:
        say(f"wrote the report page to {directory / PAGE}")
    return True
