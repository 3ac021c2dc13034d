"""The report table drawn without Rich (gradcheck.formats.plain_table) is Rich's own, character for character, on
every report it draws, and leaves to Rich every report it cannot draw exactly (findings, colour, --verbose, a line
or a table that does not fit, a character of uncertain width)."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import TESTS, audited

import gradcheck
from gradcheck import formats
from gradcheck.engine.environment import describe
from gradcheck.formats import plain_table, table
from gradcheck.model.findings import Severity
from gradcheck.model.report import Report

BENCH = TESTS.parent / "bench" / "programs"
WIDTHS = (60, 80, 100, 140)


def _exec_report(program, *argv, **options) -> Report:
    result = audited(program, *argv, **options)
    return Report(environment=describe(result.device), scenarios=(result,), fail_on=Severity.ERROR)


@pytest.fixture(scope="module")
def reports() -> dict[str, Report]:
    found = {
        "chains": gradcheck.check("chains"),
        "chains no-backward": gradcheck.check("chains", fault="no-backward"),
        "chains outside-tape": gradcheck.check("chains", fault="outside-tape"),
        "nested-struct": gradcheck.check("nested-struct"),
        "tiles": gradcheck.check("tiles"),
        "lights": gradcheck.check("lights"),
        "spring-chain": gradcheck.check("spring-chain"),
        "exec one backward": _exec_report(BENCH / "one_backward.py"),
        "exec fit loop": _exec_report(BENCH / "fit_loop.py", "--iters", "80", "--n", "64"),
        "exec one second": _exec_report(BENCH / "one_second.py", "--iters", "30"),
        "exec captured": _exec_report(TESTS / "programs" / "exec" / "captured_training.py", "--device", "cpu"),
    }
    clean = found["exec fit loop"]
    result = clean.scenarios[0]
    long_note = "a note long enough to wrap: " + "word " * 30
    found["exec long note"] = dataclasses.replace(clean, scenarios=(dataclasses.replace(result, notes=(long_note,)),))
    found["exec wide name"] = dataclasses.replace(clean, scenarios=(dataclasses.replace(result, name="p" * 120),))
    found["exec markup-like name"] = dataclasses.replace(
        clean, scenarios=(dataclasses.replace(result, name="run[bold]x[/] ok", notes=("[red]not markup[/]",)),)
    )
    found["exec wide character"] = dataclasses.replace(clean, scenarios=(dataclasses.replace(result, name="fit 損失"),))
    return found


def _rich(report, width: int, verbose: bool = False) -> str:
    text = table.render(report, width=width, verbose=verbose)
    return "\n".join(line.rstrip() for line in text.split("\n"))


def test_the_plain_table_is_richs_own_wherever_it_draws_one(reports):
    drawn = set()
    for name, report in reports.items():
        for width in WIDTHS:
            assert formats.render(report, "table", width=width) == _rich(report, width), (name, width)
            if plain_table._lines(report, width) is not None:
                drawn.add(name)
    # the common reports take the plain path (or this test compares Rich with itself)
    assert {"chains", "nested-struct", "tiles", "exec one backward", "exec fit loop", "exec one second"} <= drawn
    assert "exec markup-like name" in drawn  # brackets in a name or note are text on both paths


def test_what_it_cannot_draw_exactly_is_left_to_rich(reports):
    for name in ("chains no-backward", "exec long note", "exec wide name", "exec wide character"):
        assert plain_table._lines(reports[name], 100) is None, name  # findings; a wrapped line; a truncated rule
    assert plain_table._lines(reports["exec fit loop"], 30) is None  # the params table does not fit
    clean = reports["exec fit loop"]
    assert "\x1b[" in formats.render(clean, "table", color=True)  # colour: Rich's
    assert formats.render(clean, "table", verbose=True) == _rich(clean, 100, verbose=True)


def test_a_clean_exec_report_imports_no_rich():
    import subprocess
    import sys

    code = (
        "import sys, runpy; sys.argv = ['gradcheck', 'exec', '--output', sys.argv[1], sys.argv[2]]\n"
        "from gradcheck.cli.console import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('RICH' if any(m == 'rich' or m.startswith('rich.') for m in sys.modules) else 'NO-RICH')\n"
    )
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        out = subprocess.run(
            [sys.executable, "-c", code, f"{folder}/report.txt", str(BENCH / "one_backward.py")],
            capture_output=True,
            text=True,
            timeout=300,
        )
        report = open(f"{folder}/report.txt").read()
    assert out.stdout.strip().endswith("NO-RICH"), out.stdout[-2000:] + out.stderr[-2000:]
    assert "no findings" in report
