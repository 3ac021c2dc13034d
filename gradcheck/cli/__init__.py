"""The command line: ``gradcheck.cli:main`` is the console script; ``app`` is the Typer app."""

from gradcheck.cli.app import app, main

__all__ = ["app", "main"]
