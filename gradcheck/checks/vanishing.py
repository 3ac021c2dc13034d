"""vanishing: a param whose gradient, from its first audited backward on, is too small for the loss to see it.

The measure is the relative sensitivity of one backward, ``|g| * scale(x) / |loss|``: how much the loss would
change, relative to itself, if the param moved by its own scale along the gradient. Below float32's resolution
(``--vanishing``, 1e-7) the loss as computed cannot tell that the param moved: it cannot be trained.

Why "its own scale" is ``max(|x|, sqrt(n))`` (|x| the L2 norm of the param's values, n the elements of its shape,
a vec3 counting once): the
scale-free sensitivity is the elasticity ``g·x / loss``: |g| against ``loss / |x|``, the same whatever units the
param and the loss are in. A param near zero (a bias initialised at 0) has no scale of its own yet, and loss / |x|
is then infinite: every gradient would look small. So each element's scale is floored at one unit, the magnitude
float32 holds with full precision and a well-posed parametrisation aims for; for an n-element param that is a step
of 1 on every element, an L2 step of sqrt(n) (the old floor of 1 for the whole array made a large zero-initialised
param look sqrt(n) times fainter than the same per-element gradient on a scalar). The floor only ever raises the
scale, so it errs toward silence: a param is flagged only when even a unit step of every element is invisible.
The value norm is read once, when the param's first audited iteration closes (after that iteration's update; no
reduction per backward): a gradient this small moves the param by a negligible amount under gradient descent, and
a step-normalising optimiser (Adam) by at most its step size per element per update, so that scale holds for the
run within the orders of magnitude the threshold is about.

Why the verdict needs more than one small gradient (each a false warning on correct code otherwise):
- a gradient shrinks as the loss reaches its minimum: a bias at its optimum has |g| 1e-10 against a loss of 0.01.
  So every audited backward is judged against *its own* loss, and the param must be below the threshold from its
  FIRST audited backward on: a param that was ever visible to the loss trained, and converging is not vanishing;
- one backward cannot tell a param that cannot train from one that starts at its optimum, nor a program's
  smoke test from its training: at least ``MIN_BACKWARDS`` (3) audited backwards, all of them small: the first
  and then two more after the program's optimizer had two chances to move it. Under ``gradcheck run`` the params
  are restored every pass, so every pass is a first backward; it must run as many passes (the default 5 does);
- one param of a layer whose siblings train (``model.fc.bias`` beside a training ``model.fc.weight``, one field of
  a struct whose other fields train) is part of a model that trains: a bias that data centring or a normalisation
  makes redundant, a gate that sits saturated. Siblings are the params with the same owner path (the subject up
  to its last ``.field``, see ``owner``); the program's own root object is no layer: ``example.drag`` beside a
  training ``example.stiffness`` (every array of a Warp example hangs off one object) is still judged.
- a param the program visibly moved over the run (its value norm at the end differs from the one after its first
  update by ``MOVED`` of its scale) trains, whatever its gradient's size: a step-normalising optimiser (Adam)
  follows a physically tiny but real gradient to the optimum.
A backward whose loss is unknown (a ``grads=``-seeded backward) or non-finite, or whose gradient is absent or
non-finite, leaves the param without a verdict. Exactly zero on every backward is missing-gradient's business.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gradcheck.model.evidence import Measure, Record
from gradcheck.model.findings import Finding, Severity
from gradcheck.model.options import DEFAULT_CHECKS, CheckOptions
from gradcheck.model.paths import family_prefix, family_sizes, group_by_family
from gradcheck.model.trace import NormSample, ParamTrace, Trace

NAME = "vanishing"
SUMMARY = (
    "a param's gradient must be large enough, relative to the loss and to its own scale, to be resolved in float32 "
    "on some backward"
)
# the first audited backward and two more after the program's optimizer could move the param
MIN_BACKWARDS = 3

EXPLAIN = """
What it means: from its first audited backward on, on every backward audited (at least 3), the param's gradient
was nonzero but too small for the loss to see the param: |g| * scale / |loss|, the relative change of the loss if
the param moved by its own scale along the gradient, stayed below float32's resolution (--vanishing, 1e-7). Its
scale is the norm of its values at the first audited backward, at least one unit per element (sqrt(n) for n
elements): a param near zero has no scale of its own yet, and the floor only makes the check quieter. Each backward
is judged against its own loss.

Not reported, because it is not evidence that the param cannot train: a gradient that was visible earlier and
shrank as the loss reached its minimum (a bias at its optimum); fewer than 3 audited backwards (or --passes under
run); one param of a layer or struct whose sibling params (the same owner path: model.fc.bias beside
model.fc.weight) train; a backward with an unknown loss (seeded with grads=). A program's root object (a global
such as example, p or model, a scenario's attribute) is no layer: example.drag beside a training example.stiffness is
still reported. Nor is a param the program visibly moved over the run (its value norm changed by 1e-3 of its scale
from its first update to the end): its optimizer follows the gradient, however small (Adam normalises its steps).
Exactly zero is missing-gradient.

Common causes: a coefficient in the wrong units (1e-12 instead of 1e-3), a loss dominated by other terms, a
param that only matters through a saturated function.

Fix: rescale the loss or the parametrisation so every param's influence is within a few orders of magnitude.
"""


@dataclass(frozen=True)
class _Faint:
    """Why a param was judged vanishing: its samples and their sensitivities, all below the threshold."""

    param: ParamTrace
    samples: tuple[NormSample, ...]
    sensitivities: tuple[float, ...]
    scale: float

    @property
    def sensitivity(self) -> float:
        """The largest over its backwards: the most the loss ever saw of it."""
        return max(self.sensitivities)


def check(trace: Trace, options: CheckOptions = DEFAULT_CHECKS) -> tuple[Finding, ...]:
    params = [p for p in trace.params if p.is_param]
    threshold = options.vanishing
    trains = {owner(p) for p in params if owner(p) is not None and _visible(p, trace, threshold)}
    faint = [f for p in params if owner(p) not in trains and (f := _judge(p, trace, threshold)) is not None]
    sizes = family_sizes(p.name for p in params)
    findings = []
    for fam, members in group_by_family(faint, key=lambda f: f.param.name).items():
        worst = min(members, key=lambda f: f.sensitivity)
        findings.append(
            _finding(trace, worst, members, family_prefix(len(members), sizes[fam], fam, "smallest"), threshold)
        )
    return tuple(findings)


def owner(param: ParamTrace) -> str | None:
    """The layer that holds a param as one of its fields: its path up to the last ``.field`` (``model.fc`` for
    ``model.fc.bias.grad``, ``layers[2]``, ``model.geo``), or None. A bare name (``drag``, ``example``, ``p``) is not
    a layer: it is a global of the program or an attribute of the scenario, the program itself (an ``Example``
    holding every array, the scenario object), so its params are not siblings of each other; nor is a param held
    directly (``x``, ``controls[3]``). Read off the subject, the path both ``run`` and ``exec`` name alike."""
    path = param.subject.removesuffix(".grad")
    head, dot, _ = path.rpartition(".")
    return head if dot and ("." in head or "[" in head) else None


def scale(param: ParamTrace) -> float:
    """max(|x|, sqrt(n)): the param's value norm, at least one unit per element (see the module docstring)."""
    floor = math.sqrt(max(math.prod(param.shape), 1)) if param.shape else 1.0
    value = param.value_norm
    return max(value, floor) if math.isfinite(value) else floor


def _samples(param: ParamTrace, trace: Trace) -> tuple[NormSample, ...]:
    """The param's history; a hand-built trace without one falls back to its kept records."""
    if param.history:
        return param.history
    out = []
    for q in param.passes:
        record = trace.record(q.index)
        norm = q.norm if q.has_grad and not q.nonfinite else math.nan
        out.append(NormSample(q.index, norm, record.loss if record is not None else None))
    return tuple(out)


def _sensitivity(sample: NormSample, scale_: float) -> float | None:
    """|g| * scale / |loss| on one backward; None where it cannot be judged (unknown, zero or non-finite loss,
    absent or non-finite gradient)."""
    loss = sample.loss
    if loss is None or not math.isfinite(loss) or loss == 0 or not math.isfinite(sample.norm):
        return None
    return sample.norm * scale_ / abs(loss)


def _visible(param: ParamTrace, trace: Trace, threshold: float) -> bool:
    """The loss saw this param on some backward: it trains."""
    s = scale(param)
    return any((v := _sensitivity(x, s)) is not None and v >= threshold for x in _samples(param, trace))


def _judge(param: ParamTrace, trace: Trace, threshold: float) -> _Faint | None:
    samples = _samples(param, trace)
    if len(samples) < MIN_BACKWARDS or not any(x.norm > 0 for x in samples):
        return None
    s = scale(param)
    sensitivities = tuple(_sensitivity(x, s) for x in samples)
    if any(v is None or v >= threshold for v in sensitivities) or _moved(param, s):
        return None
    return _Faint(param, samples, sensitivities, s)


MOVED = 1e-3  # the param's value norm changed by this much of its scale over the run: the program trains it


def _moved(param: ParamTrace, scale_: float) -> bool:
    """The program moved the param over the run (its value norm at the end against the one read after its first
    update): whatever the gradient's size, its optimizer follows it (Adam normalises every step, so a physically
    tiny but real gradient still trains the param to its optimum). A param that cannot train stays put."""
    first, last = param.value_norm, param.final_value_norm
    return math.isfinite(first) and math.isfinite(last) and abs(last - first) >= MOVED * scale_


@dataclass(frozen=True, eq=False)
class VanishingEvidence(Record):
    """A param family the loss cannot see: the worst member's relative ``sensitivity`` (ranked by: the smaller, the
    worse) and the samples it was judged on; ``affected`` every member."""

    sensitivity: float
    norm: float
    loss: float
    value_norm: float
    scale: float
    backwards: tuple[int, ...]
    norms: tuple[float, ...]
    losses: tuple[float, ...]
    threshold: float
    affected: tuple[str, ...]

    @property
    def subjects(self) -> tuple[str, ...]:
        return self.affected

    @property
    def rank(self) -> Measure | None:
        return Measure.of(self.sensitivity, "sensitivity {:.2g}", smaller_is_worse=True)


def _finding(trace: Trace, faint: _Faint, members: list[_Faint], who: str, threshold: float) -> Finding:
    param, first, last = faint.param, faint.samples[0], faint.samples[-1]
    unit, units, n = trace.unit, trace.units, len(faint.samples)
    message = (
        f"{who}gradient norm {first.norm:.3g} against loss {first.loss:.3g} on {unit} {first.backward}, and as small "
        f"on all {n} {units} audited (last: norm {last.norm:.3g}, loss {last.loss:.3g}): relative sensitivity at most "
        f"{faint.sensitivity:.2g} at the param's scale {faint.scale:.3g}, below float32 resolution ({threshold:.1g}) "
        f"from the first {unit} on: the loss cannot see this param"
    )
    return Finding(
        check=NAME,
        severity=Severity.WARNING,
        subject=param.subject,
        message=message,
        hint=(
            "look for a coefficient in the wrong units or a term that drowns this param's: rescale the loss or the "
            "parametrisation, or check that the loss depends on this param as intended"
        ),
        evidence=VanishingEvidence(
            sensitivity=faint.sensitivity,
            norm=first.norm,
            loss=first.loss,
            value_norm=param.value_norm,
            scale=faint.scale,
            backwards=[x.backward for x in faint.samples],
            norms=[x.norm for x in faint.samples],
            losses=[x.loss for x in faint.samples],
            threshold=threshold,
            affected=[f.param.subject for f in members],
        ),
    )
