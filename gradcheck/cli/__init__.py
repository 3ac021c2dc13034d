"""The command line: ``gradcheck.cli:main`` is the console script (cli.console); ``app``, the Typer app (cli.app),
is imported on first use, so a plain ``gradcheck exec`` starts its program without Typer or the other commands."""

import sys
import types

from gradcheck.cli.console import main


class _Package(types.ModuleType):
    """This package, whose ``app`` is always the Typer app: importing the submodule ``gradcheck.cli.app`` (which
    binds the package's attribute of that name to the submodule) leaves it so, as the eager import did."""

    @property
    def app(self):
        from gradcheck.cli.app import app

        return app

    @app.setter
    def app(self, _submodule) -> None:
        pass


sys.modules[__name__].__class__ = _Package

__all__ = ["app", "main"]
