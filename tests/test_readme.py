"""The README and the reference pages under docs/ say what is true today: their examples run, their pasted outputs
are what the commands print, their links resolve, and the layout page names every module."""

from __future__ import annotations

import re

import pytest
import readme_outputs
from conftest import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 300


def _first_python_block(page: str, heading: str) -> str:
    """The first ```python block after ``heading`` on ``page``, as a user would copy it."""
    text = (ROOT / page).read_text(encoding="utf-8")
    return re.search(r"```python\n(.*?)```", text[text.index(heading) :], re.S).group(1)


def test_readme_contract_example_runs_clean(tmp_path):
    from conftest import run_scenario

    path = tmp_path / "readme_linear.py"
    path.write_text(_first_python_block("docs/scenarios.md", "## The scenario contract"))
    result, _ = run_scenario(str(path), passes=3, n="3")
    assert result.error is None, result.error
    assert result.name == "linear"
    assert result.findings == ()
    assert result.params[0].norms == (14**0.5,) * 3  # d/dx sum((i+1) x_i) = [1, 2, 3]


def test_readme_documents_every_builtin_fault():
    from gradcheck.scenario.catalog import builtin_infos

    text = (DOCS / "scenarios.md").read_text(encoding="utf-8")
    for info in builtin_infos():
        assert f"`{info.name}`" in text
        for fault in info.faults:
            assert f"`{fault}`" in text, fault


def test_readme_clipping_example_runs(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "clip_example.py"
    path.write_text(_first_python_block("docs/api.md", "## Clipping"))
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line and not line.startswith(("Warp", "Module", "   "))]
    total, changed = lines[-1].split()
    assert abs(float(total) - 3.0) < 1e-4  # x.grad after clip_on_tape has norm 3
    assert int(changed) > 0


def test_readme_is_short():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; move reference text to a page under docs/"


@pytest.mark.parametrize("block", readme_outputs.all_blocks(), ids=lambda b: b.label)
def test_pasted_output_is_what_the_command_prints_today(block):
    if not block.program.exists():
        pytest.skip(f"{block.program.relative_to(ROOT)} is missing (`make test-compat` makes it)")
    diff = readme_outputs.stale(block)
    assert diff is None, f"{block.label} is stale; `{readme_outputs.UPDATE}` rewrites it:\n{diff}"


def test_readme_pastes_a_run_report_and_docs_paste_few_outputs():
    """The pasted outputs are few and cheap: each one runs in `make test`."""
    labels = [b.label for b in readme_outputs.all_blocks()]
    assert any(label.startswith("README.md: $ gradcheck run ") for label in labels), labels
    assert len(labels) <= 5, labels


def _markdown_pages():
    return [README, *sorted(DOCS.glob("*.md"))]


def _anchors(path) -> set[str]:
    """The anchors GitHub gives the page's headings: lowercase, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    anchors = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.replace("`", "").strip().lower()).replace(" ", "-")
        anchors.add(slug)
    return anchors


@pytest.mark.parametrize("page", _markdown_pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page):
    text = page.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)\s]+)\)", re.sub(r"^```.*?^```", "", text, flags=re.S | re.M))
    broken = []
    for link in links:
        if re.match(r"[a-z]+:", link):  # https:, mailto:
            continue
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        if not path.exists():
            broken.append(f"{link}: no file {path}")
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(f"{link}: no heading with anchor #{anchor} in {path.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_readme_links_every_reference_page():
    text = README.read_text(encoding="utf-8")
    for page in sorted(DOCS.glob("*.md")):
        assert f"](docs/{page.name})" in text, f"README.md does not link docs/{page.name}"


def test_no_shipped_file_cites_the_field_notes():
    """The field notes are an internal document that does not ship: messages and docs cite `gradcheck explain
    CHECK` or a page under docs/ instead."""
    shipped = [*(ROOT / "gradcheck").rglob("*.py"), *(ROOT / "scenarios").rglob("*.py"), *_markdown_pages()]
    shipped.append(ROOT / "pyproject.toml")
    citing = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in shipped
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"field[ -]notes", line, re.I)
    ]
    assert not citing, citing


def _bullet(text: str, start: str) -> str:
    """The layout page's bullet that starts with ``start`` (e.g. "`gradcheck/cli/`"), up to the next bullet."""
    match = re.search(rf"^- {re.escape(start)}.*?(?=^- |^\n|\Z)", text, re.S | re.M)
    assert match, f"docs/layout.md has no bullet for {start}"
    return match.group(0)


def test_layout_page_names_every_module():
    """docs/layout.md names every module of the package in its folder's bullet (warp_compat's by stem); a check's
    module is named by the check's own name in the registry."""
    from gradcheck.checks import BY_NAME

    text = (DOCS / "layout.md").read_text(encoding="utf-8")
    package = ROOT / "gradcheck"
    missing = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package)
        folder = relative.parts[0] if len(relative.parts) > 1 else None
        if path.name == "__init__.py":
            continue
        if folder is None:
            named = f"`{path.name}`" in _bullet(text, "At the top")
        elif folder == "checks":
            named = path.stem.replace("_", "-") in BY_NAME or f"`{path.name}`" in _bullet(text, "`gradcheck/checks/`")
        elif folder == "examples":
            named = f"`{path.name}`" in text
        elif folder == "warp_compat":
            named = f"`{path.stem}`" in _bullet(text, "`gradcheck/warp_compat/`")
        else:
            named = f"`{path.name}`" in _bullet(text, f"`gradcheck/{folder}/`")
        if not named:
            missing.append(relative.as_posix())
    assert not missing, f"docs/layout.md does not name {missing}"


def _synopsis() -> dict[str, str]:
    """docs/usage.md's synopsis block: each command's lines, continuation lines included."""
    text = (DOCS / "usage.md").read_text(encoding="utf-8")
    block = re.search(r"```text\n(gradcheck .*?)```", text, re.S).group(1)
    by_command: dict[str, str] = {}
    command = None
    for line in block.splitlines():
        if line.startswith("gradcheck "):
            command = line.split()[1]
        by_command[command] = by_command.get(command, "") + " " + line
    return by_command


def test_usage_synopsis_lists_every_option_of_every_command_and_no_other():
    import typer

    from gradcheck.cli.app import app

    synopsis = _synopsis()
    group = typer.main.get_command(app)
    wrong = []
    for name, command in group.commands.items():
        options = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
        options = {opt for opt in options if opt.startswith("-")} - {"--help"}
        shown = set(re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", synopsis.get(name, "")))
        wrong += [f"{name}: {opt} not in the synopsis" for opt in sorted(options - shown)]
        wrong += [f"{name}: {opt} is no option" for opt in sorted(shown - options)]
    assert set(synopsis) - {"--version"} == set(group.commands), sorted(synopsis)
    assert not wrong, wrong
