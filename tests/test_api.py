"""Python API and pytest helper."""

from __future__ import annotations

import pytest
from conftest import SCENARIOS

import gradcheck
from gradcheck.testing import assert_gradients_healthy


def _load(path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"api_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    import sys

    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_check_accepts_a_spec_and_returns_the_json_report():
    report = gradcheck.check("spring-chain", device="cpu", passes=2, fault="optimizer-in-place")
    data = report.to_dict()
    assert data["schema"] == "gradcheck/1" and data["exit_code"] == 1
    assert [f["check"] for f in data["scenarios"][0]["findings"]] == ["mutated-gradient"]


def test_check_accepts_a_scenario_class_and_settings_of_any_type():
    module = _load(SCENARIOS / "retain_grad.py")
    report = gradcheck.check(module.RetainGrad, device="cpu", passes=3, settings={"n": 6}, fault="no-zero")
    (result,) = report.scenarios
    assert result.name == "retain-grad" and result.options == {"n": "6"}
    assert {f.check for f in result.findings} >= {"accumulation", "zero-audit"}


def test_assert_gradients_healthy_passes_on_a_clean_scenario():
    module = _load(SCENARIOS / "retain_grad.py")
    report = assert_gradients_healthy(module.RetainGrad(), device="cpu", passes=2)
    assert report.scenarios[0].findings == ()


def test_assert_gradients_healthy_lists_the_findings():
    module = _load(SCENARIOS / "custom_adjoint.py")
    with pytest.raises(AssertionError) as caught:
        assert_gradients_healthy(
            module.CustomAdjoint, checks=["fd-mismatch"], device="cpu", passes=1, fault="wrong-adjoint"
        )
    text = str(caught.value)
    assert "error fd-mismatch x[" in text and "][1]" in text and "fix:" in text
