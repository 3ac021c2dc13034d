"""``gradcheck exec`` without Typer's parse, when the command line is a plain one.

Typer (0.29) builds a pydantic adapter for every option it parses: ~0.1 s before the program's first line, as
much as 300 small backwards of the program itself, paid by every ``gradcheck exec``. The options are read here
straight from ``exec_program``'s own signature (its Typer declarations: flags, defaults, types, bounds), so there is
one definition of them; anything this reader is not sure of (``--help``, an unknown option, a value of the wrong
type or out of bounds) goes to Typer, which says what is wrong as for every other command.
"""

from __future__ import annotations

import enum
import inspect
import typing
from pathlib import Path


def run_fast(args: list[str]) -> int | None:
    """The exit code of ``gradcheck exec ARGS``, or None: let Typer parse them."""
    import typer

    from gradcheck.cli.exec_program import exec_program

    values = _parse(args, _options(exec_program))
    if values is None:
        return None
    try:
        exec_program(**values)
    except typer.Exit as done:
        return int(done.exit_code or 0)
    return 0


def _options(function) -> dict:
    """flag → (parameter name, its type, its OptionInfo), for every option of ``function``."""
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
