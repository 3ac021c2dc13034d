"""The one observer of a Warp program's autodiff: every driver shows it a program, every check reads its records.

``gradcheck run`` (a scenario's passes), ``gradcheck exec`` (an unmodified program) and ``gradcheck.audit()`` (a
notebook, a test suite) all install this observer through gradcheck.warp_compat.hooks and get the same
evidence, iteration by iteration, for the same checks with the same severities. It sees:

- a recording start and end (``with tape:``): write-after-read while it records (observe.rewrites), the arrays it
  read (for ``changed-before-backward``), the kernels built without a backward;
- each ``tape.backward``: before it, struct adjoint pointers (a dangling one stops or skips that backward), inputs
  changed since the recording, leftovers of an earlier iteration (observe.leftovers); after it, every param's and
  leaf's gradient statistics on the device, and what the tape reached;
- each launch outside backward: updates (``x`` written from ``x.grad``: a param) and gradients rewritten by their
  update and read afterwards (observe.gradient_use);
- each zero step: the zero audit, once the program's zero step is over (the next recording, the next backward,
  the driver's word, or the end);
- graph replays, as a backward of the tape whose backward was captured (Newton's examples capture
  forward+backward once). While a graph is being captured nothing runs (launches and copies are recorded into
  the program's graph), so the observer does nothing device-side then: it only notes which tape's backward was
  captured, and audits each replay of it.

An iteration is a pass of the runner (the driver opens and closes it) or, under ``auto_iterations``, one backward
of the program. Nothing here ever breaks the program: a failure of the observer's own becomes an InternalError
(reported as ``internal-error``), and the program goes on.
"""

from __future__ import annotations

import contextlib
import weakref
from dataclasses import replace

from gradcheck.measure.liveness import LIVENESS, readable
from gradcheck.model.sites import caller_site, short
from gradcheck.model.trace import PassRecord
from gradcheck.observe import values
from gradcheck.observe.blame_watch import BlameHooks
from gradcheck.observe.cadence import AuditWindows
from gradcheck.observe.causes import Causes
from gradcheck.observe.config import ObserverConfig
from gradcheck.observe.gradient_use import GradientUse
from gradcheck.observe.graphs import CapturedGraphs, GraphReplays
from gradcheck.observe.guard import DanglingAdjointStop, Guarded
from gradcheck.observe.input_watch import InputWatches
from gradcheck.observe.iteration import Iteration
from gradcheck.observe.leftovers import Leftovers, classify_residue
from gradcheck.observe.log import IterationLog
from gradcheck.observe.names import Names
from gradcheck.observe.params import ParamBook, updates
from gradcheck.observe.pointers import PointerWatch
from gradcheck.observe.rewrites import RewriteWatch
from gradcheck.warp_compat.runtime import active_tape, capturing

_NOT_READ = "arrays built on memory they do not own (wp.array(ptr=...)) whose owner may have been freed were not read"


class Observer(AuditWindows, GraphReplays, BlameHooks, Causes, Guarded):
    """Install with ``with observer.installed():``; then ``trace_fields()`` gives what a Trace is built from."""

    def __init__(self, *, roots, ledger=None, config: ObserverConfig | None = None, blame=None):
        """``config``: how the driver sees iterations and what it wants (observe.config, one frozen value every
        driver builds from its check options); ``blame``: exec's per-launch tests (a LaunchTests of
        observe.launch_tests: ``--blame`` and the default adjoint test), None for none."""
        from gradcheck.measure.gradients import GradientReader
        from gradcheck.tape.tape_arguments import TapeArguments

        super().__init__()
        self.config = config = config or ObserverConfig()
        device, cadence = config.device, config.cadence
        self.device, self.ledger = device, ledger
        self.stop_on_dangling, self.auto_iterations, self.fixed_params = (
            config.stop_on_dangling, config.auto_iterations, config.fixed_params)  # fmt: skip
        self.watch_inputs = True  # fingerprint what this recording reads (changed-before-backward; config.watch_inputs)
        self.book = ParamBook()
        self.names = Names(roots, ledger)
        self.reader = GradientReader(config.tolerance, compare=config.fixed_params)
        self.log = IterationLog()
        self.arguments = TapeArguments()
        self.leftovers = Leftovers(device, self.names)
        self.use = GradientUse(lambda a: values.checksum(a, device), lambda a: values.norm(a, device), device)
        self.pointers = PointerWatch(self.names, ledger)
        self.backwards = 0
        self.devices: dict[str, None] = {}  # where the backwards ran (their losses' devices), in order of first use
        self.graph_replays = self.audited_replays = 0  # graph replays seen, and audited as a backward
        self.notes: list[str] = []  # what the observer could not do, said in the report
        self.after_backward: list = []  # driver callbacks after each backward (exec refreshes --output)
        # which backwards get the full evidence and how many did; the window since the last one is not audited;
        # the hooks' switch (set while installed): launches and host reads watched or not (observe.cadence)
        self.cadence, self.audited, self._light, self.launch_switch = cadence, 0, False, None
        self.no_backward_kernels: set[str] = set()
        self._it: Iteration | None = None
        self._recordings = 0
        self._structure_changed = True
        self._wars: dict[int, RewriteWatch] = {}
        self._hazards: tuple = ((), ())
        self.inputs = InputWatches()  # what each recording read, fingerprinted at launch time
        self._zero_label: str | None = None
        self._in_zero_step = 0
        self._last = None  # (tape, loss, grads) of the last backward: what a graph replay runs again
        self._moved = False  # an update launch ran since the last backward
        self._leaf_values: dict | None = None
        self.graphs = CapturedGraphs()
        self._recorded = weakref.WeakSet()  # tapes that recorded a computation (a reset() empties them first)
        self.blame = blame  # exec's per-launch tests (observe.launch_tests), or None
        self.before_backward: list = []  # callbacks before each backward runs (the torch bridge's)
        self._init_causes(config.max_norm, config.keep_dataflow)

    # -- installation and the driver's protocol ---------------------------------------------------------------
    @contextlib.contextmanager
    def installed(self):
        from gradcheck.warp_compat import observed

        with observed(self):
            yield self

    @property
    def wants_launches(self) -> bool:
        """Launches are sorted out in on_launch (a forward launch with nothing to watch is cheap); none at all
        between backwards the cadence does not audit."""
        return not self._light or (self.blame is not None and self.blame.recording)

    def declare(self, params: dict) -> None:
        """The driver's params, by key (a scenario's params())."""
        self.book.declare(params)
        for key, array in params.items():
            self.names.give(array, key)

    def note_update(self) -> None:
        """The params moved by a step not seen as a launch (a torch optimizer's): a new iteration."""
        self._moved = True

    def begin_iteration(self, index: int) -> None:
        """A new pass: what the last one left is judged against this one."""
        with self._guard("iteration"):
            self._flush_zero()
            self._close()
            self._it = Iteration(index, boundary=True)
            if self.config.watch_inputs == "first":  # every pass runs the same forward: watch what the first reads
                self.watch_inputs = index == 1

    @contextlib.contextmanager
    def zero_step(self, label: str):
        """The driver runs the program's zero step inside; it is audited once, when the whole step is over."""
        self._in_zero_step += 1
        try:
            yield
        finally:
            self._in_zero_step -= 1
            self._zero_label = label
            with self._guard("zero audit"):
                self._flush_zero()

    def readout(self, reader: str, params: dict) -> dict:
        """The driver reads the gradients of ``params`` here (the runner: after after_backward()): their stats."""
        found: dict = {}
        with self._guard("readout"):
            self.use.read_all(reader)
            found = self.reader.readout(params)
            if self._it is not None:
                self._it.readout = found
        return found

    def note(self, **fields) -> None:
        """Driver fields for the current iteration's record (``clip_total``; ``clipped``: key → stats)."""
        if self._it is not None:
            self._it.extra.update(fields)

    def end_iteration(self) -> PassRecord | None:
        with self._guard("iteration"):
            self._flush_zero()
            return self._close()
        return None

    def abandon_iteration(self) -> None:
        """The driver's pass failed half-way: it is not evidence (the passes before it are)."""
        self._it, self._zero_label = None, None
        self.use.close()

    def finish(self) -> None:
        """The program ended: the last zero step and iteration are judged."""
        with self._guard("finish"):
            self._flush_zero()
            self._close()
        if self.blame is not None:
            self._blame_settle()
        once = (
            "write-after-read not checked on the captured forward: its graph ran once (CUDA maps a graph's own "
            "memory only once it has run, and gradcheck replays the forward before the next run)"
        )
        if LIVENESS.refused and not any(n.startswith(_NOT_READ) for n in self.notes):
            self.notes.append(f"{_NOT_READ}: their checks did not run on them")
        if self.graphs.ran_once() and once not in self.notes:
            self.notes.append(once)

    def trace_fields(self) -> dict:
        """The Trace fields the observer knows (the driver adds scenario, device, probes)."""
        blame = {"launch_checks": self.blame.result} if self.blame is not None else {}  # exec --blame's
        return blame | {
            "params": self.log.traces(self.book.roles(), self._final_norms()),
            "passes": tuple(self.log.records),
            "tolerance": self.reader.tolerance,
            "no_backward_kernels": tuple(sorted(self.no_backward_kernels)),
            "fixed_params": self.fixed_params,
            "backwards": self.backwards,
            "iterations": self.backwards if self.auto_iterations else self.log.iterations,
            "sampling": self._sampling(),
            "internal_errors": tuple(self.internal_errors),
            "dataflow": self.dataflow,
        }

    # -- hooks (gradcheck.warp_compat.hooks.observed) ----------------------------------------------------
    def on_tape_enter(self, tape) -> None:
        if self.blame is not None:
            self._blame_enter(tape)
        if not self.cadence.full(self.backwards + 1):
            if not self._light and not capturing():
                with self._guard("iteration"):
                    self._go_light()
            return
        if capturing():
            return
        self._arm()
        self.unrecorded.entered(tape)
        with self._guard("recording"):
            self._flush_zero()
            if self.watch_inputs:
                self.inputs.enter(tape)
            self._recordings += 1
            n = self._recordings
            if n == 1 or self._structure_changed or (n >= 16 and n & (n - 1) == 0):
                self._wars[id(tape)] = RewriteWatch(values.fingerprint)

    def on_tape_exit(self, tape) -> None:
        if capturing():  # its launches run in the graph, where Python sees none: replayed from copies later
            self.graphs.recorded_tape(tape)
            return
        if self._light and not self.cadence.full(self.backwards + 1):
            return
        with self._guard("recording"):
            from gradcheck.warp_compat import backward_disabled, kernel_launches, tape_launches

            self._recorded.add(tape)

            new = not self.arguments.update(tape)
            # changed from the last recording's (the first recording has nothing to differ from)
            self._structure_changed = new and self._recordings > 1
            if new:
                self.no_backward_kernels |= {
                    k.key for _, k, _ in kernel_launches(tape_launches(tape)) if backward_disabled(k)
                }
            watch = self._wars.pop(id(tape), None)
            if watch is not None:
                self.names.tape = tape
                self._hazards = watch.results(self.names.label)
            self.inputs.exit(tape, self.watch_inputs)

    def on_launch(self, call, run):
        if self.blame is not None and self.blame.recording:
            recording = active_tape()
            if recording is not None:
                with self._guard("blame"):
                    self.blame.before_launch(call, recording)
        if self._light:
            return run()
        recording = active_tape()
        tape_watch = self._wars.get(id(recording)) if recording is not None and self._wars else None
        inputs = self.inputs.recording.get(id(recording)) if self.inputs.recording else None
        quiet = tape_watch is None and inputs is None and not self.use.active
        if recording is not None and quiet and call.get("record_tape", True):
            return run()  # a forward launch with nothing to watch: the common case costs a few lookups
        if capturing():
            return run()  # recorded into a graph, not run: nothing to fingerprint or read
        arguments, found, war, use = [], [], None, None
        with self._guard("launch"):
            arguments = call.arguments()
            found = updates(call, arguments, self.book.by_pointer()) if recording is None else []
            self._off_tape(call, arguments, recording)
            war = tape_watch.before(call, arguments) if tape_watch is not None and call.recorded else None
            use = self.use.before(call, arguments, found)
        result = run()
        with self._guard("launch"):
            if inputs is not None and call.recorded:
                inputs.after_launch(recording, call, arguments)
            if war is not None:
                tape_watch.after(call, arguments, war)
            if use:
                self.use.after(call, use)
            for array, _grad in found:
                self._moved = True
                self.book.note_update(array, self.names.label)
        return result

    def on_backward(self, tape, loss, grads, run):
        for callback in self.before_backward:
            callback()
        if capturing():  # recorded into a graph, not run: the replays of that graph are the backwards
            self.graphs.recorded_backward(tape, loss, grads)
            return run()
        if self.blame is not None:
            self._blame_backward(tape, loss, grads)
        if not self.cadence.full(self.backwards + 1) and self._stays_light(tape):
            return self._light_backward(run, tape, loss, grads)
        self._arm()
        self.audited += 1
        skipped = None
        with self._guard("before backward"):  # each part guards itself; this keeps the program safe from the rest
            skipped = self._before_backward(tape, loss, grads)
        if skipped:
            if self.stop_on_dangling:
                raise DanglingAdjointStop(skipped)
            return None
        self._depth += 1  # the backward's own launches and copies are not the program's
        try:
            result = run()
        finally:
            self._depth -= 1
        with self._guard("after backward"):
            self._after_backward(tape, loss, grads)
        self._tell_driver()
        return result

    def on_zero(self, tape, run):
        if self._light or capturing():
            return run()
        self._depth += 1
        try:
            result = run()
        finally:
            self._depth -= 1
        if not self._in_zero_step and not self._other_computation(tape):
            with self._guard("zero audit"):
                self._zero_label = f"tape.zero() at {short(caller_site())}"
                self.leftovers.zeroed()
                self.use.zeroed(self._zero_label)  # the window stays open: an update after it would read zeros
        return result

    def _other_computation(self, tape) -> bool:
        """``tape`` recorded a computation of its own and is not the last backward's: zeroing it is that
        computation's business (the next unittest's ``tape.reset()``), not the zero step of the last backward. A
        tape that recorded nothing (``wp.Tape().zero()``) is the program's zero step, however mistaken."""
        last = self._last[0] if self._last is not None else None
        return (
            last is not None and tape is not last and (bool(tape.launches or tape.gradients) or tape in self._recorded)
        )

    def on_host_read(self, array) -> None:
        if self._light or capturing():
            return
        with self._guard("host read"):
            self._host_read(array)
            if self.use.active:
                self.use.read(array)

    # -- backward ---------------------------------------------------------------------------------------------
    def _before_backward(self, tape, loss, grads) -> str | None:
        """Open the iteration (bookkeeping that never fails), then gather the evidence, each part on its own: a
        part that fails is an InternalError and the others still run."""
        with self._guard("zero audit"):
            self._flush_zero()
        boundary = False
        with self._guard("iteration"):
            boundary = self._boundary()
        self._rows_before(tape, loss, grads, boundary)  # gradients read since the last backward (Jacobian rows)
        if self.auto_iterations or self._it is None:
            self._close_window()  # the last backward's gradients: their use ends here
        if self._last is not None and boundary and not self.leftovers.audited:
            with self._guard("zero audit"):
                self.arguments.update(tape)  # a new iteration, no zero step since the last: what this one adds to
                self._audit(only_left=self.arguments.gradient_pointers())
        if self.auto_iterations or self._it is None:
            self._close()
            self._it = Iteration(self.backwards + 1, boundary)
        it = self._it
        self.backwards += 1
        it.backwards += 1
        it.site = it.site or caller_site()
        seed = loss if loss is not None else next(iter(grads or ()), None)  # backward(grads={array: seed})
        if seed is not None:
            self.devices.setdefault(str(getattr(seed, "device", "?")))
        self._note_seeds(loss, grads, it)  # grads=: are the seeded outputs and seeds finite?
        self.names.new_event()
        self.names.tape = tape
        it.hazards, it.identical = self._hazards
        self._hazards = ((), ())
        with self._guard("params"):
            self.arguments.update(tape)
            self.book.note_tape(tape, self.arguments.unique, loss, grads, self.names.label)
        if it.backwards == 1:
            with self._guard("leftovers"):
                self._residue(it)
        with self._guard("changed inputs"):
            it.changed = self.inputs.changed(tape, self.names.label) or ()
        with self._guard("struct pointers"):
            it.observations = self.pointers.audit(self.arguments.struct_roots, first=self.backwards == 1)
        return self._dangling(it)

    def _dangling(self, it: Iteration) -> str | None:
        dangling = [o for o in it.observations if o.check == "dangling-adjoint" and o.in_tape]
        if not dangling:
            return None
        more = f" and {len(dangling) - 1} more" if len(dangling) > 1 else ""
        it.skipped = f"dangling adjoint pointer at {dangling[0].subject}{more}"
        if self.stop_on_dangling:
            return (
                f"gradcheck stopped the program before backward #{self.backwards} ({it.site}): {dangling[0].subject} "
                "points at freed memory, backward would write there (gradcheck exec --keep-going skips such "
                "backwards instead)"
            )
        return it.skipped

    def _after_backward(self, tape, loss, grads) -> None:
        import warp as wp

        from gradcheck.tape.reachability import reachable_gradients

        with contextlib.suppress(Exception):
            wp.synchronize()
        it = self._it
        self._last, self._moved = (tape, loss, grads), False
        it.launches = len(tape.launches)
        measured = {k: a for k, a in self.book.measured().items() if a.grad is None or readable(a.grad)}
        with self._guard("gradients"):
            it.loss = values.scalar(loss) if loss is not None else it.loss
            it.stats = self.reader.measure(measured)
            produced = [
                (a.grad, a, it.stats[k], self.names.gradient_subject(a))
                for k, a in measured.items()
                if it.stats.get(k) is not None
            ]
            self.use.start(produced)
        with self._guard("leftovers"):
            # params of another computation (an earlier unittest's, updated and left) are not this tape's leftovers
            touched = self.arguments.gradient_pointers() | {getattr(g, "ptr", None) for g in tape.gradients.values()}
            own = {k: a for k, a in measured.items() if a.grad is not None and a.grad.ptr in touched}
            reach = reachable_gradients(tape, own, lambda: self.names.names, self.arguments)
            reseeded = {loss.grad.ptr} if loss is not None and getattr(loss, "grad", None) is not None else set()
            seeded = {a.grad.ptr for a in (grads or {}) if getattr(a, "grad", None) is not None}
            self.leftovers.after_backward(self.backwards, reach, reseeded, seeded)
        self._find_causes(tape, loss, grads, measured, it)
        with self._guard("iteration"):
            self._leaf_values = values.checksums(self.book.measured().values()) if not self.book.params() else None

    def _boundary(self) -> bool:
        """A new iteration: the driver opened one, an update moved a param, or (no param known) a leaf moved."""
        if self._it is not None and not self.auto_iterations:
            return self._it.boundary and self._it.backwards == 0
        if self._moved:
            return True
        if self._leaf_values is not None and not self.book.params():
            return values.checksums(self.book.measured().values()) != self._leaf_values
        return False

    def _residue(self, it: Iteration) -> None:
        """Leftovers of an earlier iteration this backward will add to (only across a boundary)."""
        if not it.boundary:
            self.leftovers.watch()
            return
        left = self.leftovers.residue()
        if left:
            it.residue = classify_residue(left, self.book, self.names)

    # -- zero step ----------------------------------------------------------------------------------------------
    def _close_window(self) -> None:
        """The gradients' use window ends (a zero step is over, or a new iteration): what was found in it is kept."""
        rewrites, cleared = self.use.close()
        if self._it is not None:
            self._it.rewrites, self._it.cleared = self._it.rewrites + rewrites, self._it.cleared + cleared

    def _flush_zero(self) -> None:
        """Audit the zero step the program made (if any), now that it is over."""
        if self._zero_label is None or self._in_zero_step:
            return
        label, self._zero_label = self._zero_label, None
        self._close_window()
        with self._guard("zero audit"):
            self._audit(label=label)

    def _audit(self, label: str | None = None, only_left: set | None = None) -> None:
        it = self._it
        if it is None:
            return
        if it.kept is None:
            it.settle_residue(self.leftovers.kept())
        survivors, audited = self.leftovers.audit(only_left=only_left)
        # an iteration may clear several times (one backward per output, a zero step after each): every survivor
        merged = {v.subject: v for v in (*it.survivors, *survivors)}
        it.survivors, it.audited, it.zero_step = tuple(merged.values()), audited, label

    def _close(self) -> PassRecord | None:
        it, self._it = self._it, None
        if it is None or it.backwards == 0 and not it.extra:
            return None
        from gradcheck.measure.struct_audit import pointer_issue

        if it.kept is None:
            it.settle_residue(self.leftovers.kept())
        self.reader.commit()
        self.leftovers.new_iteration()
        samples, described = self._samples(it)
        record = it.record(tuple(pointer_issue(o) for o in it.observations))
        self.log.add(record, samples, described)
        return record

    def _samples(self, it: Iteration):
        measured = self.book.measured()
        clipped = it.extra.get("clipped") or {}
        samples, described = {}, {}
        fresh = [measured[k] for k in it.stats if k in measured and not self.log.knows(k)]
        norms = values.norms(fresh, self.device)  # one launch for every array seen for the first time
        for key, stats in it.stats.items():
            reading = self.reader.record(key, stats, it.readout.get(key), clipped.get(key))
            samples[key] = replace(reading, index=it.index)
            array = measured.get(key)
            if array is not None and not self.log.knows(key):
                described[key] = (
                    self.names.gradient_subject(array),
                    tuple(array.shape),
                    values.dtype_name(array.dtype),
                    norms.get(id(array), float("nan")),
                )
        return samples, described
