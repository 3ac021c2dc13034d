"""`gradcheck explain`: every registered check is explained, and the documented fix really works."""

from __future__ import annotations

import pytest
from conftest import cli

from gradcheck.checks import REGISTRY
from gradcheck.model.exit_codes import ExitCode


@pytest.mark.parametrize("module", REGISTRY, ids=lambda m: m.NAME)
def test_every_check_has_meaning_causes_fix(module):
    text = module.EXPLAIN
    for section in ("What it means:", "Common causes:", "Fix:"):
        assert section in text, (module.NAME, section)


def test_explain_cli_lists_and_explains():
    listing = cli("explain")
    assert listing.returncode == 0
    assert all(m.NAME in listing.stdout for m in REGISTRY)
    one = cli("explain", "accumulation")
    assert one.returncode == 0 and "tape.zero()" in one.stdout
    bad = cli("explain", "nope")
    assert bad.returncode == ExitCode.USAGE and bad.stderr.startswith("gradcheck: error: unknown check 'nope'")


def test_the_documented_stale_adjoint_fix_refreshes_the_mirror():
    from gradcheck.checks import run_checks
    from gradcheck.engine.runner import run_passes
    from gradcheck.scenarios.nested_struct import NestedStruct

    class Fixed(NestedStruct):
        def setup(self, device, fault=None):
            super().setup(device, fault)
            self.model.geo.scale = self.model.geo.scale  # the fix `gradcheck explain stale-adjoint` gives
            self.geo.scale = self.geo.scale

    trace = run_passes(Fixed(), name="fixed", device="cpu", passes=2, fault="requires-grad-off")
    assert not [f for f in run_checks(trace) if f.check == "stale-adjoint"]
