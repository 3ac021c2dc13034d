"""Run options as frozen, typed values, validated in one place.

The CLI, ``gradcheck.check``, ``gradcheck.audit``, ``sweep``, ``selftest`` and ``ci`` all build these; a value that
makes no sense raises UsageError here, naming the option as the command line spells it, whoever passed it. So
``gradcheck.check(..., fd="fsat")`` is the same usage error as ``--fd fsat``, never a silently skipped
check, and ``clip_norm=-1`` is refused before any scenario runs instead of failing deep inside one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from gradcheck.model.errors import UsageError
from gradcheck.model.findings import Severity


class FDMode(str, Enum):
    """Finite-difference check: random directions (fast), single entries (elements), or none."""

    fast = "fast"
    elements = "elements"
    off = "off"


class BlameMode(str, Enum):
    """Per-launch adjoint test (adjoint-mismatch): when fd-mismatch finds a disagreement (auto), always, never."""

    auto = "auto"
    always = "always"
    off = "off"


class FailOn(str, Enum):
    """The severities ``--fail-on`` accepts: the lowest that makes the exit code 1."""

    error = "error"
    warning = "warning"


def _enum(kind: type[Enum], value, flag: str):
    try:
        return kind(value.value if isinstance(value, Enum) else value)
    except ValueError:
        known = ", ".join(m.value for m in kind)
        raise UsageError(f"{flag} {value!r} is not one of: {known}") from None


def severity(value, flag: str = "--fail-on") -> Severity:
    """A Severity from a Severity, a FailOn or its name ("error", "warning", "info")."""
    if isinstance(value, Severity):
        return value
    text = value.value if isinstance(value, Enum) else value
    if not isinstance(text, str):
        raise UsageError(f"{flag} must be a severity name (error, warning, info), got {value!r}")
    try:
        return Severity.parse(text)
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from None


def _positive(value, flag: str, what: str = "a positive number") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise UsageError(f"{flag} must be {what}, got {value!r}")
    return float(value)


def _count(value, flag: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{flag} must be a whole number, got {value!r}")
    if value < minimum:
        raise UsageError(f"{flag} must be at least {minimum}, got {value!r}")
    return value


def _set(obj, name: str, value) -> None:
    object.__setattr__(obj, name, value)  # frozen dataclasses normalise their own fields in __post_init__


MAX_NORM = 1e6  # explosion's default --max-norm


@dataclass(frozen=True)
class CheckOptions:
    """Thresholds the checks use; documented defaults, configurable from the CLI."""

    # explosion: a gradient norm above this on any pass (--max-norm). None: the default, MAX_NORM, which spares a
    # gradient that only grew as the loss did; a value the user gives is a promise kept whatever the loss did
    max_norm: float | None = None
    # explosion: the norms of one indexed family (controls[0..T]) spanning more than this factor,
    # growing toward the start of the rollout: backprop through time amplifying
    growth: float = 1e4
    # vanishing: |g| * scale(x) / |loss| below this (float32 cannot resolve the loss change a step
    # along the gradient would make; float32 epsilon is 1.2e-7)
    vanishing: float = 1e-7

    max_norm_given: bool = field(default=False, init=False)  # the user gave --max-norm (max_norm= to check/audit)

    def __post_init__(self) -> None:
        _set(self, "max_norm_given", self.max_norm is not None)
        _set(self, "max_norm", MAX_NORM if self.max_norm is None else _positive(self.max_norm, "--max-norm"))
        _set(self, "growth", _positive(self.growth, "growth"))
        _set(self, "vanishing", _positive(self.vanishing, "vanishing"))


@dataclass(frozen=True)
class FDOptions:
    """Finite-difference check settings (``--fd``, ``--fd-warn``, ``--fd-error``)."""

    mode: FDMode = FDMode.fast
    directions: int = 3
    elements: int = 2  # per family: this many largest-gradient entries and this many random ones
    warn: float = 1e-2  # relative error bands (anchor: warp.autograd's rtol 1e-2)
    error: float = 1e-1
    seed: int = 0
    auto_elements: bool = True  # fall back to element mode when fast mode fails

    def __post_init__(self) -> None:
        _set(self, "mode", _enum(FDMode, self.mode, "--fd"))
        _count(self.directions, "FD directions")
        _count(self.elements, "FD elements")
        warn, error = self.warn, self.error
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (warn, error)) or not (
            0 < warn <= error < math.inf
        ):
            raise UsageError(f"--fd-warn ({warn}) must be positive and at most --fd-error ({error})")
        _set(self, "warn", float(warn))
        _set(self, "error", float(error))


@dataclass(frozen=True)
class RunOptions:
    """Everything that decides how scenarios run and are judged."""

    device: str | None = None  # None: cuda:0 when available, else cpu
    passes: int = 5
    fault: str | None = None
    settings: Mapping[str, str] = field(default_factory=dict)  # --set key=value; values become strings
    fail_on: Severity = Severity.ERROR
    debug: bool = False
    clip_norm: float | None = None  # --clip-norm: clip params' gradients after readout, report before/after
    trace_nonfinite: bool = False  # --trace-nonfinite: re-run with wp.config.verify_fp when NaN/Inf is found
    fd: FDOptions = field(default_factory=FDOptions)  # finite-difference check (--fd fast|elements|off)
    replay: bool = True  # the reentrancy probe (--no-replay to skip)
    blame: BlameMode = BlameMode.auto  # per-launch adjoint test (--blame auto|always|off)
    checks: CheckOptions = field(default_factory=CheckOptions)
    timeout: float | None = None  # --timeout: run in a worker process, stop a scenario after this many seconds

    def __post_init__(self) -> None:
        _count(self.passes, "--passes")
        if self.device is not None and (not isinstance(self.device, str) or not self.device.strip()):
            raise UsageError(f"--device must be a device name such as cpu or cuda:0, got {self.device!r}")
        if self.fault is not None and not isinstance(self.fault, str):
            raise UsageError(f"--fault must be a fault name (see `gradcheck list`), got {self.fault!r}")
        if not isinstance(self.settings, Mapping):
            raise UsageError(f"settings must be a mapping of option names to values, got {self.settings!r}")
        _set(self, "settings", {str(k): str(v) for k, v in self.settings.items()})
        _set(self, "fail_on", severity(self.fail_on))
        _set(self, "blame", _enum(BlameMode, self.blame, "--blame"))
        if self.clip_norm is not None:
            _set(self, "clip_norm", _positive(self.clip_norm, "--clip-norm"))
        if self.timeout is not None:
            _set(self, "timeout", _positive(self.timeout, "--timeout", "a positive number of seconds"))
        for name, kind in (("fd", FDOptions), ("checks", CheckOptions)):
            if not isinstance(getattr(self, name), kind):
                raise UsageError(f"{name} must be a {kind.__name__}, got {getattr(self, name)!r}")


def parse_settings(items, *, once: bool = False) -> dict[str, str]:
    """``--set KEY=VALUE`` items as a dict. Later keys win (a script's default, then the caller's override),
    except with ``once``: sweep's one comma list must not be replaced unseen by a later ``--set`` of its key."""
    settings: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"malformed --set {item!r}; write --set KEY=VALUE (e.g. --set steps=100)")
        key = key.strip()
        if once and key in settings:
            raise UsageError(
                f"--set {key} is given twice ({key}={settings[key]}, then {key}={value}); give each key once, "
                f"the swept one as --set {key}=V1,V2,..."
            )
        settings[key] = value
    return settings


# every default lives here, once: the CLI's options, gradcheck.check(), gradcheck.audit() and the checks read them
DEFAULT_CHECKS = CheckOptions()
DEFAULT_FD = FDOptions()
DEFAULT_RUN = RunOptions()


# gradcheck exec / audit(): a program's first AUDIT_FIRST backwards get the full evidence, then every
# AUDIT_EVERY-th backward and the one after it (gradcheck.observe.cadence: cost flat in training length)
AUDIT_FIRST = 64
AUDIT_EVERY = 128
