"""Exception types that become one line on stderr and a documented exit code.

Anything else escaping a scenario is wrapped into ScenarioError where the scenario is called
(engine.scenario_hooks); a traceback is shown only with --debug.
"""

from gradcheck.model.exit_codes import ExitCode


class GradcheckError(Exception):
    """An expected failure with a message that names the subject and the fix."""

    exit_code = ExitCode.SCENARIO_ERROR


class UsageError(GradcheckError):
    """The command line is wrong: unknown scenario/fault/option, bad value, unreadable path."""

    exit_code = ExitCode.USAGE


class ScenarioError(GradcheckError):
    """A scenario failed to import, set up or run, or broke the scenario contract."""

    exit_code = ExitCode.SCENARIO_ERROR
