"""How every command ends: its document rendered through the formats registry to stdout or ``--output``, and a
usage error as one stderr line plus, under ``--format json``/``junit``, the same error as one document.

One place builds the usage-error document of every command (:func:`usage_document`) and one place writes a
document (:func:`deliver`): a write that fails, on ``--output`` or on stdout (``> /dev/full``), is one line and
exit 2 in every command, never a silent exit 0 or a traceback.

Typer is imported only where a Typer object is asked for (the shared option declarations below, built on first use
through the module's ``__getattr__``; ``typer.Exit``): ``gradcheck exec`` reaches :func:`judged`,
:func:`suppressions` and :func:`usage_error` without it, so its program starts without paying Typer's import.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from gradcheck.cli.output import color, error_line, width, write_atomically
from gradcheck.formats import KIND_OF_COMMAND, RENDERERS, OutputFormat, render
from gradcheck.model.errors import UsageError
from gradcheck.model.exit_codes import ExitCode


def _shared_options() -> dict:
    """``--output``, ``--verbose``, ``--select``, ``--ignore``, ``--source-root`` and ``--html`` as every command
    declares them."""
    import typer

    return {
        "OUTPUT": typer.Option(None, "--output", metavar="FILE", help="write the report to FILE instead of stdout"),
        "VERBOSE": typer.Option(False, "--verbose", "-v", help="every finding's full message, not one row per cause"),
        "HTML": typer.Option(
            None, "--html", metavar="DIR", help="also write the report as one self-contained page, DIR/index.html"
        ),
        "SOURCE_ROOT": typer.Option(
            None, "--source-root", metavar="DIR", help="sarif/github/gitlab paths relative to DIR (default: git's top)"
        ),
        "SELECT": typer.Option(
            None, "--select", metavar="CHECK[:SUBJECT]", help="report only these findings (glob subject); repeatable"
        ),
        "IGNORE": typer.Option(
            None,
            "--ignore",
            metavar="CHECK[:SUBJECT]",
            help="suppress these findings (glob subject; counted); repeatable",
        ),
    }


def __getattr__(name: str):
    """OUTPUT, VERBOSE, SELECT, IGNORE, SOURCE_ROOT, HTML: made once, when the first command module imports them."""
    if name in ("OUTPUT", "VERBOSE", "SELECT", "IGNORE", "SOURCE_ROOT", "HTML"):
        globals().update(_shared_options())
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def format_option(command: str):
    """``--format``, its help naming the formats this command can print."""
    import typer

    names = supported_formats(command)
    return typer.Option(OutputFormat.table, "--format", metavar=f"[{'|'.join(names)}]", help=" or ".join(names))


def supported_formats(command: str | None) -> tuple[str, ...]:
    kind = KIND_OF_COMMAND.get(command, command)
    return tuple(f.value for f in RENDERERS[kind]) if kind in RENDERERS else tuple(f.value for f in OutputFormat)


def usage_document(command: str, message: str, fail_on=None, source: str | None = None):
    """The document ``command`` prints when a usage error stopped it: its own kind, carrying only the error."""
    from gradcheck.model import documents

    kind = KIND_OF_COMMAND.get(command, command)
    if kind in ("report", "ci"):
        from gradcheck.engine.environment import describe
        from gradcheck.model.options import FailOn, severity
        from gradcheck.model.report import Report

        report = Report(
            environment=describe(None),
            scenarios=(),
            fail_on=severity(fail_on or FailOn.error),
            error=message,
            error_code=ExitCode.USAGE,
        )
        return report if kind == "report" else documents.CiDoc(report, source)
    if kind == "sweep":
        return documents.SweepDoc(scenario=source or "", error=message)
    by_kind = {
        "explain": documents.ExplainDoc,
        "selftest": documents.SelftestDoc,
        "doctor": documents.DoctorDoc,
        "list": documents.ScenarioListDoc,
        "new": documents.NewDoc,
    }
    return by_kind[kind](error=message)


def usage_exit(command: str, exc, fmt=OutputFormat.table, output: Path | None = None, **context):
    """:func:`usage_error` as the ``typer.Exit(2)`` a command raises."""
    import typer

    return typer.Exit(usage_error(command, exc, fmt, output, **context))


def usage_error(command: str, exc, fmt=OutputFormat.table, output: Path | None = None, **context) -> int:
    """One ``gradcheck: error:`` line; under json/junit the usage-error document too: to --output when it can be
    written there (so no stale report is left for CI to read), else to stdout. Returns the exit code (2)."""
    message = str(exc)
    error_line(message)
    kind = KIND_OF_COMMAND.get(command, command)
    try:
        fmt = OutputFormat(fmt)
    except ValueError:
        fmt = OutputFormat.table
    if fmt == OutputFormat.table or fmt not in RENDERERS[kind]:
        return int(ExitCode.USAGE)
    document = usage_document(command, message, **context)
    text = render(document, fmt, color=False, width=100)
    if output is None or "--output" in message or not _written(output, text):  # never onto what it named
        import typer

        try:
            deliver(document, fmt, None)
        except typer.Exit:
            pass  # stdout failed too: its line is said, the exit code stays the usage error's
    return int(ExitCode.USAGE)


def _written(output: Path, text: str) -> bool:
    """Whether ``text`` reached ``output``; False, silently, where the usage error is --output itself."""
    from gradcheck.cli.output import check_writable, write_report_file

    try:
        check_writable(output)
        write_report_file(output, text)
    except (UsageError, OSError):
        return False
    return True


def deliver(document, fmt, output: Path | None, *, verbose: bool = False) -> None:
    """``document`` in ``fmt`` to ``output`` (plain, 100 columns) or stdout (terminal width and colour). A write
    that fails is one error line and Exit(2). A reader that went away (``| head``) read what it wanted: the
    rest is dropped quietly and the command still ends with its verdict's exit code (``set -o pipefail`` in CI
    sees the verdict, not an error that never happened)."""
    if output is not None:
        write_atomically(output, render(document, fmt, color=False, width=100, verbose=verbose))
        return
    if sys.stdout is None:  # started with stdout closed: the error line on stderr says it all
        return
    text = render(document, fmt, color=color(), width=width(), verbose=verbose)
    if not text:
        return
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        discard_stdout()
    except OSError as exc:
        import typer

        discard_stdout()
        error_line(f"cannot write the report to stdout: {exc.strerror or exc}; give --output FILE")
        raise typer.Exit(int(ExitCode.USAGE)) from None


def usage_failure(message: str, args: list[str], code: int = int(ExitCode.USAGE)) -> int:
    """A command line the parser rejected: one error line naming the way to help; under ``--format json`` (or
    junit) the command's usage-error document on stdout too. Returns the exit code."""
    commands = (set(RENDERERS) | set(KIND_OF_COMMAND)) - {"report"}
    command = next((a for a in args if a in commands), None)
    where = f"gradcheck {command} --help" if command else "gradcheck --help"
    fmt = _requested_format(args)
    kind = KIND_OF_COMMAND.get(command, command)
    if "'--format'" in message and fmt not in supported_formats(command):  # Click lists every format there is
        message = f"--format {fmt!r} is not one gradcheck {command} prints; use {_either(supported_formats(command))}"
    else:
        message = _plain(message, args)
    error_line(f"{message.strip().rstrip('.')}; see `{where}`")
    if kind in RENDERERS and fmt in supported_formats(command) and fmt != OutputFormat.table.value:
        deliver(usage_document(command, message.strip()), fmt, None)
    return code


_INVALID = re.compile(r"Invalid value for '(?P<option>-[^']+)': (?P<why>.*)", re.S)
_TYPE_ERRORS = (  # Typer validates through pydantic: its phrasing, in the words of gradcheck's own checks
    ("Input should be a valid integer", "must be a whole number"),
    ("Input should be a valid number", "must be a number"),
    ("Input should be a valid boolean", "must be true or false"),
)


def _plain(message: str, args: list[str]) -> str:
    """Click/pydantic's "Invalid value for '--passes': Input should be a valid integer, unable to parse string as
    an integer" as gradcheck says it elsewhere: "--passes must be a whole number, got 'abc'"."""
    match = _INVALID.match(message.strip())
    if match is None:
        return message
    option, why = match["option"], match["why"].strip().removeprefix("Value error, ")
    for phrase, plain in _TYPE_ERRORS:
        if why.startswith(phrase):
            value = _value_of(option, args)
            return f"{option} {plain}" + (f", got {value!r}" if value is not None else "")
    return f"{option}: {why}"


def _value_of(option: str, args: list[str]) -> str | None:
    """The last value given to ``option`` on the command line (``--opt V`` or ``--opt=V``)."""
    value = None
    for i, arg in enumerate(args):
        if arg == option and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(option + "="):
            value = arg.split("=", 1)[1]
    return value


def _either(names) -> str:
    return " or ".join(names) if len(names) < 3 else ", ".join(names[:-1]) + " or " + names[-1]


def _requested_format(args: list[str]) -> str | None:
    for i, arg in enumerate(args):
        if arg == "--format" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--format="):
            return arg.split("=", 1)[1]
    return None


def discard_stdout() -> None:
    """After a failed write, what is still buffered would fail again at exit (a second message, a traceback):
    point fd 1 at /dev/null and drop it there."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
        sys.stdout.flush()
    except (OSError, ValueError):
        pass


def suppressions(select: list[str] | None, ignore: list[str] | None):
    """The project's ``[tool.gradcheck]`` select/ignore with the command line's (its --select replaces the
    config's, its --ignore adds). Raises UsageError for an unknown check or a malformed table. The check registry
    is imported only when there is a rule to check against it (``exec`` starts its program without it)."""
    from gradcheck.engine.project_config import suppressions as configured

    rules = configured(Path.cwd(), _CheckNames())
    return rules.merged(select or (), ignore or (), _CheckNames()) if select or ignore else rules


class _CheckNames:
    """The registered checks' names, read from the registry when a rule is checked, not before."""

    def __iter__(self):
        from gradcheck.checks import BY_NAME

        return iter(BY_NAME)


def source_root(path: Path | None) -> str | None:
    """``--source-root`` checked before anything runs: an existing folder, absolute; None when not given."""
    if path is None:
        return None
    if not Path(path).is_dir():
        raise UsageError(f"--source-root {path}: no such folder; give the repository's root folder")
    return str(Path(path).resolve())


def judged(report, rules, not_judged: dict[str, str] | None = None, root: str | None = None):
    """The report as the user reads it: suppressed findings moved aside, every registered check named (JUnit),
    with the ones the driver gave no evidence to (``not_judged``: check -> why) kept apart from the passes."""
    from dataclasses import replace

    from gradcheck.checks import BY_NAME

    texts = {name: {"summary": m.SUMMARY, "explain": m.EXPLAIN} for name, m in BY_NAME.items()}
    judged_report = replace(rules.apply(report), checks=tuple(BY_NAME), not_judged=dict(not_judged or {}))
    return replace(judged_report, rule_texts=texts, source_root=root)
