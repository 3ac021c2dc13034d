"""``gradcheck exec`` without Typer, when the command line is a plain one.

Typer (0.29) builds a pydantic adapter for every option it parses: ~0.1 s before the program's first line, as
much as 300 small backwards of the program itself, paid by every ``gradcheck exec``; importing it at all, with the
other commands' modules, is ~20 ms more. So a plain command line is read here from :func:`exec_options`, what the
parser needs of ``exec_program``'s Typer declarations (flags, parameter, type, default, bounds), and handed to
``exec_run`` without importing Typer. ``exec_program``'s signature stays the definition users see (``--help``);
tests/test_exec_startup.py derives this table from it with :func:`options_of` and fails if they differ. Anything
this reader is not sure of (``--help``, an unknown option, a value of the wrong type or out of bounds) goes to
Typer, which says what is wrong as for every other command.
"""

from __future__ import annotations

import enum
import typing
from pathlib import Path
from typing import NamedTuple


def run_fast(args: list[str]) -> int | None:
    """The exit code of ``gradcheck exec ARGS``, or None: let Typer parse them."""
    values = _parse(args, exec_options())
    if values is None:
        return None
    from gradcheck.cli.exec_run import run_exec

    return run_exec(**values)


class Declared(NamedTuple):
    """What the parser needs of one option's declaration (Typer's OptionInfo has the same fields)."""

    default: object = None
    min: float | None = None
    max: float | None = None


def exec_options() -> dict:
    """flag → (parameter name, its type, its Declared): ``exec_program``'s options, as :func:`options_of` reads
    them from its Typer signature (a test keeps the two equal)."""
    from gradcheck.formats import OutputFormat
    from gradcheck.model.options import AUDIT_EVERY, AUDIT_FIRST, FailOn

    off_by_default = (("--verbose", "verbose"), ("-v", "verbose"), ("--keep-going", "keep_going"))
    off_by_default += (("--debug", "debug"), ("--blame", "blame"))
    found = {flag: (name, bool, Declared(False)) for flag, name in off_by_default}
    found["--adjoint-test"] = ("adjoint_test", bool, Declared(True))  # a switch with an off flag
    found["--no-adjoint-test"] = ("adjoint_test", _Off, Declared(True))
    valued = (
        ("-m", "module", str, Declared()),
        ("--format", "fmt", OutputFormat, Declared(OutputFormat.table)),
        ("--output", "output", Path, Declared()),
        ("--fail-on", "fail_on", FailOn, Declared(FailOn.error)),
        ("--select", "select", list[str], Declared()),
        ("--ignore", "ignore", list[str], Declared()),
        ("--max-norm", "max_norm", float, Declared()),
        ("--audit-first", "audit_first", int, Declared(AUDIT_FIRST, min=0)),
        ("--audit-every", "audit_every", int, Declared(AUDIT_EVERY, min=1)),
        ("--blame-at", "blame_at", int, Declared(None, min=1)),
        ("--graph", "graph", Path, Declared()),
        ("--source-root", "root", Path, Declared()),
        ("--html", "html", Path, Declared()),
    )
    found.update({flag: (name, kind, declared) for flag, name, kind, declared in valued})
    return found


def options_of(function) -> dict:
    """flag → (parameter name, its type, its OptionInfo), for every option of a Typer command ``function``."""
    import inspect

    import typer.models

    hints = typing.get_type_hints(function)
    found = {}
    for name, parameter in inspect.signature(function).parameters.items():
        info = parameter.default
        if isinstance(info, typer.models.OptionInfo):
            for flag in info.param_decls or ():
                on, _slash, off = flag.partition("/")  # "--x/--no-x": a switch, its second flag sets False
                found[on] = (name, hints.get(name, str), info)
                if off:
                    found[off] = (name, _Off, info)
    return found


_options = options_of  # the name tests/test_cli.py and tests/test_kernel_tests.py use


class _Off:
    """The type of a switch's off flag (``--no-adjoint-test``)."""


def _parse(args: list[str], options: dict) -> dict | None:
    values = {name: info.default for name, _kind, info in options.values()}
    values["program"] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("-") or arg == "-":
            values["program"] = list(args[i:])
            break
        flag, has_value, text = arg.partition("=")
        if flag not in options:
            return None  # --help, a typo, an option of the program's put before the script: Typer's to answer
        name, kind, info = options[flag]
        if kind is bool or kind is _Off:
            if has_value:
                return None
            values[name] = kind is bool
            i += 1
            continue
        if not has_value:
            if i + 1 >= len(args):
                return None
            text, i = args[i + 1], i + 1
        if typing.get_origin(kind) is list:  # a repeatable option (--ignore): every value, in order
            values[name] = [*(values[name] or []), text]
            i += 1
            continue
        value = _convert(text, kind, info)
        if value is None:
            return None
        values[name] = value
        if flag == "-m":  # python -m MODULE: everything after the module is the program's
            values["program"] = list(args[i + 1 :])
            break
        i += 1
    if values.get("module") is None and not values["program"]:
        return None
    return values


def _convert(text: str, kind, info):
    if kind not in (str, int, float, Path) and not (isinstance(kind, type) and issubclass(kind, enum.Enum)):
        return None
    try:
        if isinstance(kind, type) and issubclass(kind, enum.Enum):
            return kind(text)
        value = kind(text)
    except (TypeError, ValueError):
        return None
    low, high = getattr(info, "min", None), getattr(info, "max", None)
    if (low is not None and value < low) or (high is not None and value > high):
        return None
    return value
