"""The report table drawn without Rich where the result is Rich's own, character for character; Rich (formats.table)
draws everything else.

Why: importing Rich is ~20 ms, a fifth of ``gradcheck exec``'s fixed cost on a short program (issue 42), and the
report most runs print (no colour, the default view, lines that fit, the params table, the default adjoint test's
line, no findings) needs none of its layout: each line fits, so nothing wraps; the params table is Rich's
unexpanded table, each column as wide as its widest cell, cells padded by one space (none at the edges). A report
with anything else (colour, ``--verbose``, findings, a run that failed, a clipped run, a line or a table too wide,
a character whose width is not plainly one cell) is drawn by Rich. tests/test_plain_table.py holds the two to the
same text on the built-in scenarios' and programs' reports, clean and faulty, at several widths.
"""

from __future__ import annotations

from gradcheck.formats import table

_ONE_CELL = set("—×·…→←▁▂▃▄▅▆▇█!")  # non-ASCII characters one cell wide in every terminal Rich measures


def render(report, *, color: bool = False, width: int = 100, verbose: bool = False) -> str:
    """The report table: drawn here when it can be exactly, else by Rich (formats.table.render)."""
    lines = None if color or verbose else _lines(report, width)
    if lines is None:
        return table.render(report, color=color, width=width, verbose=verbose)
    return "\n".join(lines) + "\n"


class _Unsure(Exception):
    """Something Rich would lay out in a way this module does not copy: Rich draws the report."""


def _lines(report, width: int) -> list[str] | None:
    out: list[str] = []
    try:
        _line(out, table.header(report), width)
        if report.error:
            raise _Unsure
        for result in report.scenarios:
            _scenario(out, result, width)
        for line in table._summary(report).split("\n"):
            _line(out, line, width)
    except _Unsure:
        return None
    return out


def _scenario(out: list[str], result, width: int) -> None:
    if result.error or result.clip or result.findings:
        raise _Unsure
    title, options = table.titles(result)
    title += f"  ({options})" if options else ""
    if _cells(title) > width - 2:
        raise _Unsure  # Rich truncates it with an ellipsis
    out.append("")
    out.append(f"{title} " + "─" * (width - _cells(title) - 1))  # Rich's left-aligned rule
    _line(out, table.units_line(result), width)
    for note in result.notes:
        _line(out, f"note: {note}", width)
    _params(out, result, width)
    if result.blame is not None:
        _blame(out, result.blame, width)
    _line(out, "no findings", width)


def _params(out: list[str], result, width: int) -> None:
    if not result.params:
        return
    families, shown = table.param_rows(result, verbose=False)
    headers = ["param gradient", "pass 1", "last", "last/1", "norm per pass", "verdict"]
    rows = [table.param_values(members, verdicts, None) for members, verdicts in shown]
    _table(out, headers, rows, right={1, 2, 3}, width=width, first_min=table.name_width(rows, headers, width))
    if len(shown) < len(families):
        _line(out, table.more_params_line(families, shown), width)


def _table(
    out: list[str], headers: list[str], rows: list[list[str]], *, right: set, width: int, first_min: int
) -> None:
    """Rich's ``Table(box=None, pad_edge=False, show_edge=False)`` when it fits unexpanded: each column as wide as
    its widest cell (the first at least ``first_min``), one space of padding inside, none at the edges."""
    n = len(headers)
    widths = [max(_cells(headers[i]), *(_cells(row[i]) for row in rows)) for i in range(n)]
    widths[0] = max(widths[0], first_min)
    if sum(widths) + 2 * (n - 1) > width:
        raise _Unsure  # Rich would fold or shrink a column
    for cells in [headers, *rows]:
        parts = []
        for i, cell in enumerate(cells):
            pad = widths[i] - _cells(cell)
            text = " " * pad + cell if i in right else cell + " " * pad
            parts.append(text)
        out.append("  ".join(parts))


def _blame(out: list[str], blame, width: int) -> None:
    """exec's default adjoint test with no wrong kernel: its one line (the table is Rich's)."""
    if (
        blame.skipped
        or not blame.why.startswith(table.DEFAULT_ADJOINT_TEST)
        or any(table._wrong(k) for k in blame.kernels)
    ):
        raise _Unsure
    if "[" in blame.why:
        raise _Unsure  # Rich reads it as markup
    out.append("")
    _line(out, table._default_test_line(blame, escape=str), width)


def _line(out: list[str], text: str, width: int) -> None:
    if _cells(text) > width:
        raise _Unsure  # Rich wraps it at a word
    out.append(text)


def _cells(text: str) -> int:
    """Terminal cells of ``text`` where each character is plainly one; anything else (a wide or combining character,
    a tab, a control character) leaves the report to Rich."""
    if text.isascii():
        if not text.isprintable():
            raise _Unsure
        return len(text)
    if any(not (c.isascii() and c.isprintable()) and c not in _ONE_CELL for c in text):
        raise _Unsure
    return len(text)
