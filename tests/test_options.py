"""Options are validated in one place (gradcheck.model.options): the CLI, the Python API, the pytest helper
and `gradcheck ci` refuse the same bad values with the same usage error, before any scenario runs."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import SCENARIOS, cli, cli_json

import gradcheck
from gradcheck.model.exit_codes import ExitCode
from gradcheck.model.findings import Severity
from gradcheck.model.options import CheckOptions, FDMode, FDOptions, RunOptions
from gradcheck.testing import assert_gradients_healthy

BAD_API_OPTIONS = [
    ({"fd": "fsat"}, "--fd 'fsat' is not one of: fast, elements, off"),
    ({"clip_norm": -1}, "--clip-norm must be a positive number, got -1"),
    ({"clip_norm": float("nan")}, "--clip-norm must be a positive number"),
    ({"max_norm": 0}, "--max-norm must be a positive number, got 0"),
    ({"passes": 0}, "--passes must be at least 1, got 0"),
    ({"passes": 2.5}, "--passes must be a whole number, got 2.5"),
    ({"fail_on": "fatal"}, "--fail-on: unknown severity 'fatal'"),
    ({"settings": ["steps=3"]}, "settings must be a mapping"),
]


@pytest.mark.parametrize(("options", "message"), BAD_API_OPTIONS, ids=[str(o) for o, _ in BAD_API_OPTIONS])
def test_the_api_refuses_bad_options_before_running(options, message):
    with pytest.raises(gradcheck.UsageError) as caught:
        gradcheck.check(str(SCENARIOS / "raises.py"), device="cpu", **options)  # would raise if it ran
    assert message in str(caught.value)


def test_values_are_normalised_once_and_frozen():
    options = RunOptions(passes=2, fail_on="warning", settings={"steps": 30}, fd=FDOptions(mode="elements"))
    assert options.fail_on is Severity.WARNING
    assert options.settings == {"steps": "30"}  # as --set would pass it
    assert options.fd.mode is FDMode.elements
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.passes = 3
    with pytest.raises(gradcheck.UsageError, match="must be positive and at most --fd-error"):
        FDOptions(warn=0.5, error=0.1)
    with pytest.raises(gradcheck.UsageError, match="--max-norm must be a positive number"):
        CheckOptions(max_norm=-1.0)
    with pytest.raises(gradcheck.UsageError, match="--timeout must be a positive number of seconds"):
        dataclasses.replace(options, timeout=0)  # replace() validates too


def test_the_cli_gives_the_same_message_as_the_api():
    proc, data = cli_json("run", str(SCENARIOS / "raises.py"), "--clip-norm", "-1", "--device", "cpu")
    assert proc.returncode == ExitCode.USAGE
    assert data["error"] == "--clip-norm must be a positive number, got -1.0"
    assert proc.stderr.strip().splitlines()[-1] == f"gradcheck: error: {data['error']}"


@pytest.mark.parametrize(
    ("checks", "message"),
    [(["nonfnite"], "unknown check(s) 'nonfnite'"), ("nonfinite", "must be a list of check names")],
)
def test_the_pytest_helper_refuses_unknown_checks(checks, message):
    """A typo in ``checks=`` would otherwise filter out every finding and pass on broken gradients."""
    with pytest.raises(gradcheck.UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        assert_gradients_healthy(str(SCENARIOS / "raises.py"), checks=checks, device="cpu")


def test_ci_config_is_validated_like_the_command_line(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.gradcheck]\nfail-on = "fatal"\nscenarios = ["rollout"]\n')
    proc = cli("ci", "--device", "cpu", cwd=tmp_path)
    assert proc.returncode == ExitCode.USAGE
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("gradcheck: error: ") and "pyproject.toml: [tool.gradcheck] fail-on" in line
    (tmp_path / "pyproject.toml").write_text('[tool.gradcheck]\nscenarios = [{ spec = "rollout", passes = 0 }]\n')
    proc = cli("ci", "--device", "cpu", cwd=tmp_path)
    assert proc.returncode == ExitCode.USAGE
    assert "[tool.gradcheck] scenarios[0] passes must be a whole number of at least 1, got 0" in proc.stderr
