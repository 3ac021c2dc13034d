"""``gradcheck exec``: watch every ``tape.backward`` and ``tape.zero`` of a program nobody rewrote.

A scenario hands gradcheck its forward; an unmodified training script does not, so the audit sits where every
Warp program meets autodiff: the ``wp.Tape`` class. While installed, ``Tape.__exit__`` (the forward is recorded),
``Tape.backward`` and ``Tape.zero`` are wrapped for every tape the program makes:

- when a tape's recording ends, the arrays its launches read are fingerprinted (probes.input_watch);
- before backward: those arrays again (changed since the forward: ``changed-before-backward``), and every
  gradient the tape reaches that is already nonzero. Residue is only a bug when it was made at other param
  values: several backwards at the same params, then one optimizer step, is deliberate accumulation; residue
  after the params moved (an optimizer step since the last backward) is ``accumulation``;
- after backward: each param's gradient (norm, NaN, Inf), the loss, and the param values it was taken at;
- at zero: every gradient the tape reached must be zero afterwards (``zero-audit``).
- launches between a backward and the next zero that write a param's gradient are remembered, so an optimizer
  that rewrites the gradient in place is named (``mutated-gradient``).

Params are the leaf arrays: they require grad, a launch reads them and none lists them as an output.
Everything is plain data (frozen records per event); gradcheck.engine.program_audit turns it into findings.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import os
from dataclasses import dataclass, field

from gradcheck.model.trace import ChangedInput


@dataclass(frozen=True)
class GradSample:
    subject: str
    norm: float
    nan: int
    inf: int
    nonzero: int
    size: int
    shape: tuple = ()
    dtype: str = ""


@dataclass(frozen=True)
class Residue:
    subject: str
    norm: float
    nonzero: int
    params_moved: bool  # the params changed since the backward that could have left it


@dataclass(frozen=True)
class Rewrite:
    """A param's gradient changed between the backward that produced it and the next zero or backward."""

    subject: str
    writers: tuple[str, ...]  # launches that took the gradient as an argument meanwhile
    zeroed: bool = False


@dataclass(frozen=True)
class Pointer:
    """A struct mirror or array-of-structs record the tape uses whose gradient pointer misses the live array."""

    check: str  # "stale-adjoint" | "dangling-adjoint"
    subject: str
    detail: str


@dataclass(frozen=True)
class BackwardEvent:
    iteration: int  # 1-based count of tape.backward calls
    site: str | None  # file:line of the call
    loss: float | None
    grads: tuple[GradSample, ...]
    residue: tuple[Residue, ...] = ()
    changed: tuple[ChangedInput, ...] = ()
    rewrites: tuple[Rewrite, ...] = ()  # seen when this backward started, about the previous one
    pointers: tuple[Pointer, ...] = ()
    skipped: bool = False  # a dangling pointer: backward was not launched (--keep-going)


class DanglingAdjointStop(Exception):
    """Raised into the program instead of a backward that would write through freed memory (like a sanitizer
    stopping at the first invalid write); ``gradcheck exec --keep-going`` skips that backward instead."""


@dataclass(frozen=True)
class ZeroEvent:
    after_iteration: int  # backward calls before it
    site: str | None
    survivors: tuple[GradSample, ...]
    reached: int  # gradient buffers looked at


@dataclass
class TapeAudit:
    """Install with ``with audit.installed():``; read ``backwards``, ``zeros``, ``graph_replays`` afterwards."""

    roots: object = None  # callable → {name: object} where the program keeps its state, for names
    ledger: object = None  # an installed AllocationLedger: tells freed memory from live (dangling pointers)
    keep_going: bool = False  # a dangling pointer skips that backward instead of stopping the program
    backwards: list = field(default_factory=list)
    zeros: list = field(default_factory=list)
    graph_replays: int = 0
    audited_replays: int = 0  # graph replays audited as a backward of the tape captured in them
    _last_params: dict = field(default_factory=dict)  # id(param) → fingerprint of its values at the last backward
    _produced: dict = field(default_factory=dict)  # id(grad) → (array, fingerprint after backward, subject)
    _writers: dict = field(default_factory=dict)  # id(grad) → launch labels since the last backward
    _pending: tuple = ()  # rewrites found by a zero, reported with the next backward
    _names: object = None
    _walked: int = -1
    _last: tuple | None = None  # (tape, loss, grads) of the latest backward
    _starts: dict = field(default_factory=dict)  # id(grad) → fingerprint when the running backward started
    _left_by_backward: dict = field(default_factory=dict)  # id(grad) → fingerprint a backward left it with
    _in_backward: bool = False

    @contextlib.contextmanager
    def installed(self):
        import warp as wp

        tape_class = wp.Tape
        originals = {name: getattr(tape_class, name) for name in ("__exit__", "backward", "zero")}
        launch, capture = wp.launch, getattr(wp, "capture_launch", None)
        audit = self

        def __exit__(tape, *args):
            result = originals["__exit__"](tape, *args)
            with contextlib.suppress(Exception):
                from gradcheck.probes.input_watch import InputWatch

                tape._gradcheck_watch = InputWatch(tape)
            return result

        def backward(tape, *args, **kwargs):
            loss = args[0] if args else kwargs.get("loss")
            grads = args[1] if len(args) > 1 else kwargs.get("grads")
            audit._last = (tape, loss, grads)  # what a CUDA graph captured around it replays
            before = audit._before(tape, loss, grads)
            dangling = [p for p in before[6] if p.check == "dangling-adjoint"]
            if dangling:
                audit._after(tape, loss, before, skipped=True)
                if audit.keep_going:
                    return None
                raise DanglingAdjointStop(
                    f"gradcheck stopped the program before backward #{before[0]} ({before[1]}): "
                    f"{dangling[0].subject} points at freed memory, backward would write there "
                    "(gradcheck exec --keep-going skips such backwards instead)"
                )
            audit._in_backward = True
            try:
                return originals["backward"](tape, *args, **kwargs)
            finally:
                audit._in_backward = False
                audit._after(tape, loss, before)

        def zero(tape, *args, **kwargs):
            grads = audit._reached(tape)
            rewrites = audit._rewrites()  # before the zero step hides them
            result = originals["zero"](tape, *args, **kwargs)
            audit._zeroed(grads, rewrites)
            return result

        def watched_launch(*args, **kwargs):
            if audit._produced and not audit._in_backward and not kwargs.get("adjoint"):
                audit._note_writers(args, kwargs)
            return launch(*args, **kwargs)

        def counted_capture(*args, **kwargs):
            """A replayed graph (Newton's examples capture forward+backward once) runs the captured backward
            again without Python seeing it: audited as a backward of the last tape, when there is one."""
            audit.graph_replays += 1
            if audit._last is None:
                return capture(*args, **kwargs)
            tape, loss, grads = audit._last
            before = audit._before(tape, loss, grads)
            try:
                return capture(*args, **kwargs)
            finally:
                audit.audited_replays += 1
                audit._after(tape, loss, before)

        for name, wrapper in (("__exit__", __exit__), ("backward", backward), ("zero", zero)):
            setattr(tape_class, name, wrapper)
        wp.launch = watched_launch
        if capture is not None:
            wp.capture_launch = counted_capture
        try:
            yield self
        finally:
            for name, original in originals.items():
                setattr(tape_class, name, original)
            wp.launch = launch
            if capture is not None:
                wp.capture_launch = capture

    # -- the events -------------------------------------------------------------------------------------------

    def _before(self, tape, loss, grads):
        from gradcheck.probes.replay_probe import fingerprint

        iteration = len(self.backwards) + 1
        site = caller_site()
        arrays, params = self._arrays_and_params(tape, loss, grads)
        seeds = {id(loss)} | {id(a) for a in (grads or {})}
        moved = bool(self._last_params) and any(
            self._last_params.get(id(p)) not in (None, fingerprint(p)) for p in params
        )
        first_sight = any(id(p) not in self._last_params for p in params)
        residue, starts = [], {}
        for array in arrays:
            if id(array) in seeds or array.grad is None:
                continue
            now = fingerprint(array.grad)
            starts[id(array.grad)] = now
            if self._left_by_backward.get(id(array.grad)) != now:
                # nonzero or not, this is not what a backward left there: memory nobody zeroed before the first
                # backward (Warp allocates some gradients uninitialised), a seed the program filled itself
                continue
            sample = self._sample(array.grad, array)
            if sample.nonzero:
                residue.append(Residue(sample.subject, sample.norm, sample.nonzero, moved and not first_sight))
        self._starts = starts
        rewrites = list(self._pending) + self._rewrites()
        self._pending = ()
        watch = getattr(tape, "_gradcheck_watch", None)
        changed = ()
        if watch is not None and not watch.checked:
            watch.check()
            changed = watch.results(lambda a: self._name(a))
        return iteration, site, params, tuple(residue), changed, tuple(rewrites), self._pointers(tape)

    def _pointers(self, tape) -> tuple[Pointer, ...]:
        """The struct audit of the scenario runner, on the structs and arrays of structs this tape's launches got."""
        from gradcheck.probes.struct_audit import StructAuditor
        from gradcheck.probes.tape_arguments import TapeArguments

        roots = TapeArguments.of(tape).struct_roots
        if not roots:
            return ()
        self._name(roots[0])  # walk the program once, so the struct paths have names
        names = self._names
        labelled = [(_struct_path(names, v) or f"struct#{id(v) & 0xFFFFFF:06x}", v, True) for v in roots]
        try:
            found = StructAuditor(names, self.ledger).audit(labelled)
        except Exception:  # noqa: BLE001 - an audit that cannot read a struct must not break the program
            return ()
        return tuple(Pointer(o.check, o.subject, o.detail or o.kind) for o in found if o.in_tape)

    def _after(self, tape, loss, before, skipped: bool = False) -> None:
        import warp as wp

        from gradcheck.probes.replay_probe import fingerprint

        iteration, site, params, residue, changed, rewrites, pointers = before
        with contextlib.suppress(Exception):
            wp.synchronize()
        samples = []
        self._produced, self._writers = {}, {}
        for param in params if not skipped else ():  # a backward not launched produced no gradient to read
            sample = self._sample(param.grad, param)
            samples.append(sample)
            self._produced[id(param.grad)] = (param.grad, fingerprint(param.grad), sample.subject)
        self._last_params = {id(p): fingerprint(p) for p in params}
        if not skipped:  # what this backward wrote: residue only counts when a backward left it
            for array in self._arrays_and_params(tape, loss, None)[0]:
                grad = array.grad
                if grad is not None and id(grad) in self._starts:
                    after = fingerprint(grad)
                    if after != self._starts[id(grad)]:
                        self._left_by_backward[id(grad)] = after
        event = BackwardEvent(
            iteration, site, _scalar(loss), tuple(samples), residue, changed, rewrites, pointers, skipped
        )
        self.backwards.append(event)

    def _reached(self, tape) -> list:
        arrays, _ = self._arrays_and_params(tape, None, None)
        return [a.grad for a in arrays if a.grad is not None]

    def _zeroed(self, grads, rewrites) -> None:
        survivors = []
        for grad in grads:
            sample = self._sample(grad, None)
            if sample.nonzero:
                survivors.append(sample)
        self._pending = tuple(self._pending) + tuple(rewrites)
        self._produced, self._writers = {}, {}
        self.zeros.append(ZeroEvent(len(self.backwards), caller_site(), tuple(survivors), len(grads)))

    def _rewrites(self) -> list[Rewrite]:
        """Params' gradients rewritten since the backward that produced them; zeroing them is not a rewrite."""
        from gradcheck.probes.replay_probe import fingerprint

        found = []
        for key, (grad, produced, subject) in self._produced.items():
            if fingerprint(grad) != produced and _nonzero(grad):
                found.append(Rewrite(subject, tuple(self._writers.get(key, ())), False))
        self._produced = {}
        return found

    def _note_writers(self, args, kwargs) -> None:
        bound = _bind_launch(args, kwargs)
        if bound is None:
            return
        kernel, values = bound
        for value in values:
            if id(value) in self._produced:
                self._writers.setdefault(id(value), []).append(f"{getattr(kernel, 'key', kernel)} ({caller_site()})")

    # -- helpers ----------------------------------------------------------------------------------------------

    def _arrays_and_params(self, tape, loss, grads):
        """Every array the tape's launches were given (struct fields included), and the leaves among them."""
        from gradcheck.probes.replay_probe import arrays_of
        from gradcheck.probes.warp_compat import array_class, launch_inputs_outputs, tape_launches

        array_type = array_class()
        arrays, written, read = {}, set(), {}
        for inputs, outputs in launch_inputs_outputs(tape_launches(tape)):
            for value in inputs:
                for array in arrays_of(value, array_type):
                    arrays.setdefault(id(array), array)
                    read.setdefault(id(array), array)
            for value in outputs:
                for array in arrays_of(value, array_type):
                    arrays.setdefault(id(array), array)
                    written.add(id(array))
        for array in getattr(tape, "gradients", {}) or {}:
            if hasattr(array, "grad"):
                arrays.setdefault(id(array), array)
        skip = {id(loss)} | {id(a) for a in (grads or {})}
        params = [
            a
            for key, a in read.items()
            if key not in written and key not in skip and getattr(a, "requires_grad", False) and a.grad is not None
        ]
        return list(arrays.values()), params

    def _sample(self, grad, owner) -> GradSample:
        import numpy as np

        values = grad.numpy()
        flat = values.reshape(-1) if values.dtype.fields is None else values.view(np.uint8).reshape(-1)
        finite = np.isfinite(flat) if flat.dtype.kind == "f" else np.ones(flat.shape, dtype=bool)
        nan = int(np.count_nonzero(np.isnan(flat))) if flat.dtype.kind == "f" else 0
        inf = int(flat.size - np.count_nonzero(finite) - nan)
        good = flat[finite].astype(np.float64)
        norm = float(math.sqrt(float(np.dot(good, good)))) if good.size else 0.0
        subject = self._name(owner) + ".grad" if owner is not None else self._name(grad)
        return GradSample(
            subject,
            norm,
            nan,
            inf,
            int(np.count_nonzero(flat)),
            int(flat.size),
            tuple(owner.shape) if owner is not None else tuple(grad.shape),
            getattr(getattr(grad, "dtype", None), "__name__", str(getattr(grad, "dtype", ""))),
        )

    def _name(self, array) -> str:
        """Where the program keeps it (``example.states[0].particle_qd``), else ``array#<id>``; walked lazily."""
        names = self._names
        event = len(self.backwards) + len(self.zeros)
        if names is None or (id(array) not in names.by_id and self._walked != event):  # one walk per event at most
            fresh = _walk_roots(self.roots() if callable(self.roots) else {})
            if names is None:
                names = self._names = fresh
            else:  # a name once given stays: the history of a gradient is kept under one subject
                for known in fresh.arrays:
                    names.add(known, fresh.by_id[id(known)])
            self._walked = event
        found = names.name(array)
        if found is not None:
            return found
        return f"array#{id(array) & 0xFFFFFF:06x}"


def _struct_path(names, value) -> str | None:
    if hasattr(value, "ptr"):  # an array of structs
        return names.name(value)
    for path, instance in names.structs.values():
        if instance is value:
            return path
    return None


class _Program:
    """The program's globals as one object to walk, so names read ``example.states[0]``, not ``['example']``."""

    __module__ = "program"


def _walk_roots(roots: dict):
    import types

    from gradcheck.probes.naming import walk

    program = _Program()
    for key, value in roots.items():
        if not key.startswith("__") and not isinstance(value, (types.ModuleType, types.FunctionType, type)):
            setattr(program, key, value)
    return walk(program)


def _nonzero(grad) -> bool:
    import numpy as np

    return bool(np.any(grad.numpy().view(np.uint8)))


def _scalar(loss) -> float | None:
    try:
        if loss is not None and loss.size == 1:
            return float(loss.numpy().reshape(-1)[0])
    except Exception:  # noqa: BLE001 - a loss of a type gradcheck cannot read is not reported
        return None
    return None


def _bind_launch(args, kwargs):
    """(kernel, every argument value) of a wp.launch call, or None."""
    kernel = args[0] if args else kwargs.get("kernel")
    if kernel is None:
        return None
    values = list(args[2:4]) if len(args) > 2 else []
    values = [v for group in values for v in (group or [])]
    for key in ("inputs", "outputs"):
        values.extend(kwargs.get(key) or [])
    return kernel, values


def caller_site(skip: int = 0) -> str | None:
    """file:line of the first frame outside Warp and gradcheck: where the program called in."""
    frame = inspect.currentframe()
    while frame is not None:
        module = frame.f_globals.get("__name__", "") or ""
        if module.split(".")[0] not in ("warp", "gradcheck", "contextlib"):
            if skip <= 0:
                return f"{os.path.relpath(frame.f_code.co_filename)}:{frame.f_lineno}"
            skip -= 1
        frame = frame.f_back
    return None
