"""What the runner observed, pass by pass: the only input the checks see.

Plain frozen data (no Warp objects), so checks are pure functions that tests can feed by hand
and a report can outlive the arrays it describes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ParamPass:
    """One parameter's gradient as read right after backward on one pass."""

    has_grad: bool  # False: the array has no .grad buffer (requires_grad=False)
    norm: float  # L2 norm over the finite values, accumulated in float64
    max_abs: float  # over the finite values
    nonzero: int
    nonfinite: int  # NaN + Inf values
    equal_to_first: bool  # same as pass 1 (bitwise on CPU, within `Trace.tolerance` on CUDA)
    diff_norm: float  # ||g_k - g_1||
    coef: float  # <g_k, g_1> / <g_1, g_1>: k on pass k for linear accumulation; nan if g_1 is 0
    nan: int = 0
    inf: int = 0
    checksum: int = 0  # bit-exact, right after backward
    readout_norm: float | None = None  # after after_backward(): what the user's loop reads (None: no after_backward)
    readout_checksum: int | None = None
    clipped_norm: float | None = None  # after gradcheck's own --clip-norm step

    @property
    def mutated(self) -> bool:
        """The gradient read by the user's loop is not the one backward produced."""
        return self.readout_checksum is not None and self.readout_checksum != self.checksum


@dataclass(frozen=True)
class ParamTrace:
    name: str  # key in the scenario's params()
    subject: str  # path of its gradient as the user's code spells it, e.g. "states[0].joint_q.grad"
    shape: tuple
    dtype: str
    passes: tuple[ParamPass, ...]
    value_norm: float = float("nan")  # L2 norm of the param's values (restored to these every pass)

    @property
    def norms(self) -> tuple[float, ...]:
        return tuple(p.norm for p in self.passes)


@dataclass(frozen=True)
class Survivor:
    """A gradient buffer still nonzero after the scenario's zero step."""

    subject: str
    # "kernel argument", "struct field", "nested struct field", "array of structs", "tape.gradients", "param"
    reached_via: str
    norm: float
    nonzero: int  # scalar values (a vec3 element counts 3)
    size: int  # scalar values
    aliases: tuple[str, ...] = ()
    seeded: bool = False  # the .grad of an array the scenario passed to tape.backward(grads=...)


@dataclass(frozen=True)
class PointerIssue:
    """A struct mirror or array-of-structs record whose pointer disagrees with the live array.

    Found before backward. ``stale-adjoint`` issues send gradients to the wrong buffer;
    ``dangling-adjoint`` issues would make backward write into memory no array owns any more.
    """

    check: str  # "stale-adjoint" | "dangling-adjoint"
    kind: str  # orphan-grad | replaced-grad | null-grad | stale-data | nested-copy | freed | reused | unknown
    subject: str  # "model.geo.scale.grad", "parts[0].weight.grad"
    mirror: int  # pointer held by the mirror / record
    live: int  # pointer the live array holds (0: none)
    in_tape: bool  # the struct is an argument of a launch on this pass's tape
    owner: str | None = None  # array that owns the mirror's memory now (orphan buffer, unrelated array)
    source: str | None = None  # nested-copy: the instance the copy was taken from
    orphan_norm: float | None = None  # norm of the buffer backward really writes, read after the zero step
    detail: str = ""
    container: str = "struct"  # "struct" (an instance's ctypes mirror) | "array of structs" (raw records)


@dataclass(frozen=True)
class PassRecord:
    index: int  # 1-based
    loss: float | None
    launches: int
    audited_buffers: int  # gradient buffers the zero audit looked at
    survivors: tuple[Survivor, ...]
    seconds: float = 0.0  # wall time of the whole pass, audits included (device synchronised)
    pointer_issues: tuple[PointerIssue, ...] = ()
    backward_skipped: str | None = None  # why backward was not launched on this pass
    clip_total: tuple[float, float] | None = None  # --clip-norm: global norm (before, after)


@dataclass(frozen=True)
class Trace:
    scenario: str
    fault: str | None
    device: str
    options: Mapping = field(default_factory=dict)
    params: tuple[ParamTrace, ...] = ()
    passes: tuple[PassRecord, ...] = ()
    tolerance: float = 0.0  # relative tolerance behind ParamPass.equal_to_first; 0 means bitwise
    zero_step: str = "tape.zero()"  # how the gradients were cleared between passes
    clip_norm: float | None = None  # --clip-norm applied after readout, if any
    fd: object | None = None  # gradcheck.finite_diff.FDResult, after the passes
    replay: object | None = None  # gradcheck.replay_probe.ReplayResult, after the passes
    warp_version: str = ""  # wp.__version__: which known upstream bugs (gradcheck.known_bugs) apply
