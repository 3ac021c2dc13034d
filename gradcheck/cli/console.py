"""The console script, ``gradcheck``: a plain ``gradcheck exec`` command line goes straight to its program
(exec_fast, without Typer); every other command line, and any ``exec`` line exec_fast is unsure of, to the Typer
app (cli.app), imported only then."""

from __future__ import annotations

import sys


def main() -> None:
    """Typer's own handling of a bad command line prints a panel on stderr and nothing on stdout; here it is one
    ``gradcheck: error: …`` line and exit 2, and with ``--format json`` stdout still carries one JSON object (the
    usage error in ``error``), as for every other usage error."""
    from gradcheck.cli.output import error_line
    from gradcheck.model.exit_codes import ExitCode

    args = sys.argv[1:]
    if sys.stdout is None and not any(
        a == "--output" or a.startswith("--output=") for a in args
    ):  # started with stdout closed (>&-): nowhere for the report
        error_line("stdout is closed, so the report could not be written; give --output FILE")
        sys.exit(int(ExitCode.USAGE))
    try:
        code = None
        if args[:1] == ["exec"]:  # the program's startup is gradcheck's too: Typer only when needed
            from gradcheck.cli.exec_fast import run_fast

            code = run_fast(args[1:])
        if code is None:
            from gradcheck.cli.app import app

            code = app(prog_name="gradcheck", args=args, standalone_mode=False)
    except BrokenPipeError:  # a reader that went away outside deliver() (help text | head): no traceback
        from gradcheck.cli.reporting import discard_stdout

        discard_stdout()
        code = 1
    except Exception as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # `gradcheck` alone: the help, as Typer shows it
            exc.show()
            code = int(ExitCode.USAGE)
        elif callable(getattr(exc, "format_message", None)) and isinstance(getattr(exc, "exit_code", None), int):
            from gradcheck.cli.reporting import usage_failure

            code = usage_failure(exc.format_message(), args, exc.exit_code)  # Click's UsageError and friends
        else:
            raise
    sys.exit(code or 0)
