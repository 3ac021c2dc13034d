"""The finite-difference judge on functions whose truth is known exactly: a smooth line plus repeatable
computational noise of a chosen size, as a float32 rollout has (same input, same output; nearby inputs,
scattered outputs). The real Rollouts.central / Rollouts.noise / Judge code runs; only forward() is
replaced by the analytic line."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import SCENARIOS, by_check, run_scenario

from gradcheck.checks import fd_mismatch
from gradcheck.model.findings import Severity
from gradcheck.model.options import FDOptions
from gradcheck.model.trace import FDResult, Step, Trace
from gradcheck.rerun.fd_evidence import ecnoise, one_sided
from gradcheck.rerun.finite_diff import Judge, Rollouts


class Line(Rollouts):
    """f(x0 + t) = c + g t + k t^2 / 2 + sigma * noise(t): the loss along one probe direction."""

    def __init__(self, c: float, g: float, k: float, sigma: float):
        self.c, self.g, self.k, self.sigma = c, g, k, sigma
        self.count, self.output_size = 0, 1

    def loss(self, delta: dict) -> float:
        self.count += 1
        t = float(delta["x"][0]) if delta else 0.0
        seed = int.from_bytes(np.float64(t).tobytes(), "little") % 2**32  # the same input gives the same noise
        return self.c + self.g * t + 0.5 * self.k * t * t + self.sigma * np.random.default_rng(seed).standard_normal()


ONE = {"x": np.ones(1)}  # the probe direction, already scaled


def judge(line: Line, ad: float, floor: float = 0.0):
    return Judge(line, line.loss({}), FDOptions()).probe("direction 1", ad, ONE, floor)


@pytest.mark.parametrize("sigma", [1e-7, 6e-5, 1e-3])
def test_ecnoise_recovers_the_noise_level(sigma):
    rng = np.random.default_rng(1)
    t = np.linspace(-4e-4, 4e-4, 9)
    estimates = [ecnoise(271.6 - 0.09 * t + 3.0 * t * t + sigma * rng.standard_normal(9))[0] for _ in range(20)]
    assert all(e is not None for e in estimates)
    assert 0.5 * sigma < float(np.median(estimates)) < 2.0 * sigma


def test_ecnoise_says_when_the_spacing_is_wrong():
    assert ecnoise(np.full(9, 271.6)) == (None, "too flat")  # below the resolution: nothing changes
    assert ecnoise(np.arange(9.0) ** 2) == (None, "too smooth")  # no noise at all: no order is noise-dominated


def test_agreement_at_the_first_step_costs_two_rollouts():
    line = Line(c=1.0, g=0.7, k=0.3, sigma=0.0)
    line.count = 0
    probe = judge(line, ad=0.7)
    assert probe.converged and probe.rel_error < 1e-6 and [s.eps for s in probe.steps] == [1e-2]
    assert line.count == 3  # the base loss and the two sides of one central difference


def test_float32_rollout_noise_is_not_an_error():
    """Newton's cloth, as measured (field notes 6): loss 271.6, derivative -0.0902, noise sigma 6e-5. A central
    difference at 1e-3 is off by ~0.06 and at 1.4e-4 by ~0.4; the judge must not call the correct gradient wrong."""
    for seed_shift in range(5):  # several noise realisations
        line = Line(c=271.6 + seed_shift, g=-0.0902, k=0.05, sigma=6e-5)
        probe = judge(line, ad=-0.0902)
        assert probe.rel_error < FDOptions().error, probe
        assert line.count <= 31
        if probe.converged:  # and when it settled, the estimate is the true derivative within its noise
            assert abs(probe.fd + 0.0902) <= probe.noise + 0.005 * 0.0902


def test_a_wrong_derivative_under_noise_is_a_converged_error():
    line = Line(c=271.6, g=-0.0902, k=0.05, sigma=6e-5)
    probe = judge(line, ad=-0.1804)  # twice the truth: what a doubled custom adjoint gives
    assert probe.converged and probe.rel_error > 0.3
    assert abs(probe.fd + 0.0902) < 0.01
    finding = _check(probe)
    assert finding.severity == Severity.ERROR and "converged over" in finding.message


def test_a_loss_that_never_settles_is_no_verdict():
    """Noise so large that no step in the ladder can tell: info, never an error."""
    line = Line(c=1.0, g=1e-3, k=0.0, sigma=1e-2)
    probe = judge(line, ad=5e-3)
    assert not probe.converged
    finding = _check(probe)
    assert finding.severity == Severity.INFO and "did not settle" in finding.message
    assert line.count <= 31


def test_a_real_disagreement_without_noise_needs_no_noise_rollouts_beyond_the_budget():
    line = Line(c=0.5, g=2.0, k=40.0, sigma=0.0)  # strongly curved: truncation at large steps
    probe = judge(line, ad=1.0)
    assert probe.converged and probe.rel_error > 0.4
    assert abs(probe.fd - 2.0) < 0.05 and line.count <= 31


def _check(probe):
    fd = FDResult(mode="fast", directions=(probe,), rollouts=1, loss=271.6, noise_level=6e-5)
    (finding,) = fd_mismatch.check(Trace(scenario="line", fault=None, device="cpu", fd=fd))
    return finding


def test_noise_floor_is_reported_instead_of_zero():
    line = Line(c=271.6, g=-0.0902, k=0.05, sigma=6e-5)
    probe = judge(line, ad=-0.0902)
    fd = FDResult(mode="fast", directions=(probe,))
    assert fd.max_direction_error < fd.noise_floor or fd.max_direction_error > 0
    assert fd.noise_floor > 0 and math.isfinite(fd.noise_floor)


class Kinked(Line):
    """A piecewise-smooth loss like a contact's: slope G far away, G + B near the base point, the change over a
    width a chosen so that central differences at 1e-2 and 3e-2 both give exactly G (sin(h/a) = 0 at both)."""

    def __init__(self, g_far: float, bump: float):
        super().__init__(c=9.1, g=g_far, k=0.0, sigma=0.0)
        self.bump, self.width = bump, 1e-2 / math.pi

    def loss(self, delta: dict) -> float:
        t = float(delta["x"][0]) if delta else 0.0
        return super().loss(delta) + self.bump * self.width * math.sin(t / self.width)


def test_two_large_steps_across_a_kink_are_not_the_derivative():
    """Newton's diffsim ball, measured: -0.156 at steps 1e-2 and 3e-2 (they agree), -0.399 at every step from 3e-3
    down, and the tape says -0.399. Agreeing large steps are not convergence when smaller ones say otherwise."""
    line = Kinked(g_far=-0.15, bump=-0.25)
    probe = judge(line, ad=-0.40)
    assert probe.rel_error < FDOptions().warn and probe.converged, probe
    assert min(s.eps for s in probe.steps) < 1e-3  # decided at the small steps
    # a wrong tape is never passed; only two small steps agree on the truth here (the third is still on the
    # bump), which is not the three a disagreement needs, so it is "no verdict" rather than an error
    wrong = judge(Kinked(g_far=-0.15, bump=-0.25), ad=-0.80)
    assert not wrong.converged and wrong.rel_error > 0.4, wrong
    assert _check(wrong).severity == Severity.INFO


class Vee(Line):
    """f(x0 + t) = c + g t + j |t|: a kink at the params (a contact at rest, a back-trace on a grid node)."""

    def __init__(self, g: float, j: float):
        super().__init__(c=0.46, g=g, k=0.0, sigma=0.0)
        self.j = j

    def loss(self, delta: dict) -> float:
        t = float(delta["x"][0]) if delta else 0.0
        return super().loss(delta) + self.j * abs(t)


def test_a_kink_at_the_params_is_no_verdict_and_names_both_sides():
    probe = judge(Vee(g=0.001, j=0.004), ad=0.005)  # the tape gives the right side's derivative
    assert not probe.converged and probe.kink is not None
    left, right = probe.kink
    assert abs(left + 0.003) < 1e-4 and abs(right - 0.005) < 1e-4
    finding = _check(probe)
    assert finding.severity == Severity.INFO and "kink" in finding.message and "right side" in finding.message


def test_curvature_is_not_a_kink():
    """A smooth loss's one-sided differences differ too (by f'' eps), but the gap shrinks with the step."""
    probe = judge(Line(c=0.5, g=2.0, k=40.0, sigma=0.0), ad=1.0)
    assert probe.kink is None and probe.converged and probe.rel_error > 0.4


class Scattered(Line):
    """A loss whose central differences scatter with the step, as a ray tracer's do across pixel edges:
    f(x0 ± eps) = c ± eps * slopes[eps] + noise, so the central difference at a step in the table is slopes[eps]; at
    any other offset (ECnoise's spacing) the slope is ``rest``. The noise decides which steps are tried: with
    ``sigma=range_sigma(size)`` those from 1e-2 to 3e-1 (the smallest usable step, 2 sigma / (0.05 size), is about 8e-3)."""

    def __init__(self, slopes: dict, rest: float, sigma: float):
        super().__init__(c=3.7, g=0.0, k=0.0, sigma=sigma)
        self.slopes, self.rest = slopes, rest

    def loss(self, delta: dict) -> float:
        t = float(delta["x"][0]) if delta else 0.0
        return super().loss(delta) + self.slopes.get(abs(t), self.rest) * t


def range_sigma(size: float) -> float:
    return 2e-4 * size


# Warp's example_diffray (a loop with a run-time trip count zeroes part of the adjoint), measured: the tape says
# +39.6, central differences -34.5, -19.2, -30.5, -22.8 at four steps: no three agree, every one says "wrong"
DIFFRAY = {3e-1: -34.5, 1e-1: -19.2, 3e-2: -30.5, 1e-2: -22.8}


def test_one_sided_evidence_is_a_converged_disagreement():
    line = Scattered(DIFFRAY, rest=-26.0, sigma=range_sigma(39.6))
    probe = judge(line, ad=39.6)
    assert sorted(s.eps for s in probe.steps) == sorted(DIFFRAY)  # the steps tried: the measured ones
    assert all(abs(s.fd - DIFFRAY[s.eps]) <= s.noise for s in probe.steps)  # their values, within the noise
    assert probe.converged and probe.fd == pytest.approx(-19.2, abs=0.1)  # judged on the estimate nearest the tape
    assert probe.rel_error > 1.0
    finding = _check(probe)
    assert finding.severity == Severity.ERROR and "opposite in sign to the tape" in finding.message
    fd = FDResult(mode="fast", directions=(probe,), rollouts=1, loss=3.7)
    assert fd.disagrees  # so blame runs, along this probe's direction


def test_mixed_signs_are_no_verdict():
    line = Scattered({**DIFFRAY, 1e-1: 19.2}, rest=-26.0, sigma=range_sigma(39.6))  # one step has the tape's sign
    probe = judge(line, ad=39.6)
    assert len(probe.steps) == 4 and not probe.converged
    assert _check(probe).severity == Severity.INFO


def test_one_sided_but_within_the_spread_is_no_verdict():
    """The estimates spread wider (4.9) than the nearest one is from the tape (1.1): they could be scattered
    around a value near the tape's, so the sign alone does not decide."""
    line = Scattered({3e-1: -0.1, 1e-1: -5.0, 3e-2: -0.2, 1e-2: -4.0}, rest=-0.2, sigma=range_sigma(4.0))
    probe = judge(line, ad=1.0)
    assert len(probe.steps) == 4 and all(s.fd < 0 for s in probe.steps) and not probe.converged
    assert _check(probe).severity == Severity.INFO


@pytest.mark.parametrize(("sigma", "converged"), [(range_sigma(1.0), True), (1e-3, False)])
def test_one_sided_but_within_the_noise_is_no_verdict(sigma, converged):
    """The same one-signed estimates near -0.1 against a tape of +1: a verdict when the noise is 2e-4 (the
    estimate at 1e-2 carries ±0.04); with noise 1e-3 it carries ±0.2, so its sign is noise and there is none."""
    line = Scattered({3e-1: -0.1, 1e-1: -0.12, 3e-2: -0.09, 1e-2: -0.11}, rest=-0.1, sigma=sigma)
    probe = judge(line, ad=1.0)
    assert len(probe.steps) >= 3 and all(s.fd < 0 for s in probe.steps)  # one-sided either way
    assert probe.converged is converged
    if not converged:
        assert any(abs(s.fd) <= s.noise for s in probe.steps)
        assert _check(probe).severity == Severity.INFO


class ScatteredVee(Scattered):
    """The scattered loss with a kink at the params on top: one-sided differences slope -+ j at every step."""

    def __init__(self, slopes: dict, rest: float, sigma: float, j: float):
        super().__init__(slopes, rest, sigma)
        self.j = j

    def loss(self, delta: dict) -> float:
        t = float(delta["x"][0]) if delta else 0.0
        return super().loss(delta) + self.j * abs(t)


def test_one_sided_evidence_at_a_kink_is_still_no_verdict():
    """At a kink the tape gives one side's derivative (here the right one, positive) and central differences the
    average of both sides (negative): their signs may differ with neither wrong."""
    probe = judge(ScatteredVee(DIFFRAY, rest=-26.0, sigma=range_sigma(39.6), j=60.0), ad=39.6)
    assert all(s.fd < 0 for s in probe.steps) and not probe.converged
    left, right = probe.kink
    assert left < 0 < right  # the tape's sign is the right side's
    finding = _check(probe)
    assert finding.severity == Severity.INFO and "kink" in finding.message


def test_a_tape_of_zero_has_no_sign():
    """One-sided estimates against a tape of exactly 0 are not this rule's business (the sign of 0 is undefined)."""
    assert one_sided(0.0, [Step(e, v, 1e-3) for e, v in DIFFRAY.items()]) is None
    assert one_sided(39.6, [Step(e, v, 1e-3) for e, v in DIFFRAY.items()]).fd == -19.2


def test_one_sided_needs_three_finite_estimates():
    steps = [Step(3e-1, math.nan, math.nan), Step(1e-1, -19.2, 1e-3), Step(1e-2, -22.8, 1e-3)]
    assert one_sided(39.6, steps) is None
    assert one_sided(39.6, [*steps, Step(3e-2, -30.5, 1e-3)]).fd == -19.2


def test_a_program_whose_finite_differences_scatter_one_sidedly_is_caught_and_blamed():
    """End to end on a real Warp program (tests/scenarios/one_sided.py: hard pixel edges scatter the central
    differences from -19 to -34.5 over the ladder's seven steps; the fault's tape says +25): an error, and the blame
    probe runs and names the launch. The same program with the right adjoint is silent (its first step agrees)."""
    path = str(SCENARIOS / "one_sided.py")
    result, _ = run_scenario(path, fault="wrong-sign", passes=1)
    (fd,) = by_check(result.findings, "fd-mismatch")
    assert fd.severity == Severity.ERROR and "opposite in sign to the tape at all 7 step sizes" in fd.message
    assert result.blame.why == "fd-mismatch fired"
    (blamed,) = by_check(result.findings, "adjoint-mismatch")
    assert blamed.severity == Severity.ERROR and blamed.subject.startswith("launch #0 render_wrong")
    clean, _ = run_scenario(path, passes=1)
    assert clean.findings == () and clean.blame is None
