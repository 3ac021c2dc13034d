"""``gradcheck exec``'s start-up: only what hosting needs is imported before the program's first line runs.

Typer (~20 ms of every run), Rich, the other commands, the check registry, the format modules and the observer are the
report's or the observer's, imported when the program ends or imports Warp; a plain command line reaches the program
through cli.exec_fast, whose option table must say what exec_program's Typer declarations say.
"""

from __future__ import annotations

import json

from conftest import TESTS, cli

PROGRAM = TESTS / "programs" / "exec_startup" / "modules_at_start.py"
NOT_BEFORE_THE_PROGRAM = (
    "typer",
    "click",
    "rich",
    "gradcheck.cli.app",
    "gradcheck.cli.run",
    "gradcheck.checks",
    "gradcheck.formats.table",
    "gradcheck.formats.json_format",
    "gradcheck.formats.junit",
    "gradcheck.formats.command_tables",
    "gradcheck.observe",
    "gradcheck.engine.verdict",
    "gradcheck.model.trace",
    "numpy",
    "warp",
)


def test_the_program_starts_before_typer_rich_the_checks_and_the_formats_are_imported(tmp_path):
    seen = tmp_path / "modules.json"
    proc = cli("exec", "--format", "json", str(PROGRAM), str(seen))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["scenarios"][0]["notes"] == ["the program never imported Warp: nothing to audit"]
    modules = json.loads(seen.read_text(encoding="utf-8"))
    assert "gradcheck.cli.exec_run" in modules and "gradcheck.engine.hosting" in modules  # exec's path, hosted
    early = [m for m in modules if m.split(".")[0] in NOT_BEFORE_THE_PROGRAM or m.startswith(NOT_BEFORE_THE_PROGRAM)]
    assert early == [], f"imported before the program's first line: {early}"


def test_the_fast_parsers_table_is_exec_programs_declarations():
    """exec_fast.exec_options() is written out so a plain line never imports Typer: it must say what Typer would."""
    from gradcheck.cli.exec_fast import exec_options, options_of
    from gradcheck.cli.exec_program import exec_program

    def comparable(options):
        return {flag: (name, kind, info.default, getattr(info, "min", None), getattr(info, "max", None))
                for flag, (name, kind, info) in options.items()}  # fmt: skip

    assert comparable(exec_options()) == comparable(options_of(exec_program))


def test_the_typer_app_is_imported_on_first_use_and_stays_the_packages_app():
    import typer

    import gradcheck.cli
    import gradcheck.cli.app  # binds the package's ``app`` to the submodule, unless the package keeps its own

    assert isinstance(gradcheck.cli.app, typer.Typer)
