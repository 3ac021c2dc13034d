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
import functools

from gradcheck.measure.liveness import LIVENESS, readable
from gradcheck.model.sites import caller_site, short
from gradcheck.model.trace import PassRecord
from gradcheck.observe import values
from gradcheck.observe.blame_watch import BlameHooks
from gradcheck.observe.cadence import AuditWindow
from gradcheck.observe.causes import Causes
from gradcheck.observe.config import ObserverConfig
from gradcheck.observe.gradient_use import GradientUse
from gradcheck.observe.graphs import GraphReplays
from gradcheck.observe.guard import DanglingAdjointStop, Guard
from gradcheck.observe.iteration import Iteration
from gradcheck.observe.leftovers import Leftovers
from gradcheck.observe.log import IterationLog
from gradcheck.observe.names import Names
from gradcheck.observe.params import ParamBook, updates
from gradcheck.observe.parts import BackwardEvent, PartAttribute, PartContext, implementing
from gradcheck.observe.pointers import PointerWatch
from gradcheck.observe.recordings import Recordings
from gradcheck.observe.zero_steps import ZeroSteps
from gradcheck.warp_compat.runtime import active_tape, capturing

_NOT_READ = "arrays built on memory they do not own (wp.array(ptr=...)) whose owner may have been freed were not read"


class Observer:
    """Install with ``with observer.installed():``; then ``trace_fields()`` gives what a Trace is built from.

    It keeps the iterations; its parts (observe.parts) do the rest, each seeing a PartContext and callbacks, never
    the observer: the audit window (``window``, observe.cadence), the zero step (``zero``), the recordings
    (``recordings``), captured graphs (``graphs``), exec's per-launch tests (``blame``) and the causes (``causes``)."""

    def __init__(self, *, roots, ledger=None, config: ObserverConfig | None = None, blame=None):
        """``config``: how the driver sees iterations and what it wants (observe.config, one frozen value every
        driver builds from its check options); ``blame``: exec's per-launch tests (a LaunchTests of
        observe.launch_tests: ``--blame`` and the default adjoint test), None for none."""
        from gradcheck.measure.gradients import GradientReader
        from gradcheck.tape.tape_arguments import TapeArguments

        self.config = config = config or ObserverConfig()
        device = config.device
        self.device, self.ledger = device, ledger
        self.guard = Guard("observer")
        self.book = ParamBook()
        self.names = Names(roots, ledger)
        self.reader = GradientReader(config.tolerance, compare=config.fixed_params)
        self.log = IterationLog()
        self.arguments = TapeArguments()
        self.leftovers = Leftovers(device, self.names, remember_left=config.auto_iterations)
        self.use = GradientUse(lambda a: values.checksum(a, device), lambda a: values.norm(a, device), device)
        self.pointers = PointerWatch(self.names, ledger)
        self.backwards = 0
        self.devices: dict[str, None] = {}  # where the backwards ran (their losses' devices), in order of first use
        self.notes: list[str] = []  # what the observer could not do, said in the report
        self.after_backward: list = []  # driver callbacks after each backward (exec refreshes --output)
        self._it: Iteration | None = None
        self._last = None  # (tape, loss, grads) of the last backward: what a graph replay runs again
        self._moved = False  # an update launch ran since the last backward
        self._leaf_values: dict | None = None
        self._repeat = None  # the recording running with the launch hooks off (_repeats)
        self.before_backward: list = []  # callbacks before each backward runs (the torch bridge's)
        context = PartContext(config, self.guard, self.names, self.book, self.log, lambda: self._it)
        # which backwards get the full evidence (observe.cadence): the window since the last one is not audited
        self.window = AuditWindow(config.cadence, self.guard, self._leave_window)
        self.zero = ZeroSteps(context, self.leftovers, self.use, self.arguments)  # the zero step, audited when over
        self.recordings = Recordings(context, self.arguments)  # write-after-read, inputs read (observe.recordings)
        hazards = self.recordings.found_hazards
        self.graphs = GraphReplays(context, self.notes, blame, lambda *a: self.on_backward(*a), hazards)
        # exec's per-launch tests (observe.launch_tests), or None
        self.blame = BlameHooks(blame, self.guard, self.window, self.book.params) if blame is not None else None
        self.causes = Causes(context)
        parts = (self.window, self.zero, self.recordings, self.graphs, self.blame, self.causes)
        self.parts = tuple(p for p in parts if p is not None)
        self._entering = implementing(self.parts, "on_tape_enter")  # told of every recording and backward
        self._beginning = implementing(self.parts, "on_backward_begin")  # unless idle
        self.window.bind(self._entering, self._beginning, self._asks_more)

    # -- the hooks' protocol (gradcheck.warp_compat.hooks.observed) -------------------------------------------------
    @property
    def busy(self) -> bool:
        return self.guard.depth > 0  # Guard.busy, one call fewer: asked by every hook

    def ignoring(self):
        """Work that is not the program's (a driver's restore or clip): the hooks stand aside meanwhile."""
        return self.guard.ignoring()

    # set by the hooks while installed (warp_compat.hooks): launches and host reads, recordings and zero steps
    # watched or not; the audit window flips them (observe.cadence)
    launch_switch = PartAttribute("window", "switch")
    tape_switch = PartAttribute("window", "tape_switch")

    def on_capture_begin(self) -> None:
        self.window.lane = False
        self.window.recordings(True)  # what is recorded in a capture is the graph's: told even between windows

    def on_capture_end(self, graph) -> None:
        self.graphs.on_capture_end(graph)

    def on_graph_replay(self, graph, run):
        return self.graphs.on_graph_replay(graph, run)

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
        return not self.window.light or (self.blame is not None and self.blame.recording)

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
        with self.guard("iteration"):
            self.zero.flush()
            self._close()
            self._it = Iteration(index, boundary=True)
            self.recordings.pass_begins(index)  # every pass runs the same forward: what the first reads is watched

    def zero_step(self, label: str):
        """The driver runs the program's zero step inside; it is audited once, when the whole step is over."""
        return self.zero.step(label)

    def readout(self, reader: str, params: dict) -> dict:
        """The driver reads the gradients of ``params`` here (the runner: after after_backward()): their stats."""
        found: dict = {}
        with self.guard("readout"):
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
        with self.guard("iteration"):
            self.zero.flush()
            return self._close()
        return None

    def abandon_iteration(self) -> None:
        """The driver's pass failed half-way: it is not evidence (the passes before it are)."""
        self._it = None
        self.zero.abandon()

    def finish(self) -> None:
        """The program ended: the last zero step and iteration are judged."""
        with self.guard("finish"):
            self.zero.flush()
            self._close()
        for part in self.parts:
            part.on_finish()  # exec's per-launch tests settle
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
            "params": self.log.traces(self.book.roles(), self.causes.final_norms()),
            "passes": tuple(self.log.records),
            "tolerance": self.reader.tolerance,
            "no_backward_kernels": tuple(sorted(self.recordings.no_backward_kernels)),
            "fixed_params": self.config.fixed_params,
            "backwards": self.backwards,
            "iterations": self.backwards if self.config.auto_iterations else self.log.iterations,
            "sampling": self.window.sampling(self.backwards, self.log),
            "internal_errors": tuple(self.guard.internal_errors),
            "dataflow": self.causes.dataflow,
        }

    # -- hooks (gradcheck.warp_compat.hooks.observed) ----------------------------------------------------
    def on_tape_enter(self, tape) -> None:
        for part in self._entering:
            if not part.idle(self.backwards):  # most recordings of a long run: no call
                part.on_tape_enter(tape, self.backwards)  # exec's launch tests: a recording to copy
        if not self.window.full(self.backwards + 1):
            if not self.window.light and not capturing():
                with self.guard("iteration"):
                    self.window.leave()
            return
        if capturing():
            return
        self.window.arm()
        self.causes.recording_entered(tape)
        with self.guard("recording"):
            self.zero.flush()
            self.recordings.entered(tape)
            self._repeat = tape if self._repeats(tape) else None
        if self._repeat is not None:
            self.window.launches(False)  # Warp's own wp.launch, wp.copy, array.numpy until the recording ends

    def _repeats(self, tape) -> bool:
        """``tape`` records what the driver's first pass recorded, with nothing to watch: under ``gradcheck run``
        every pass runs the same forward at the same params (``watch_inputs="first"``), so what a recording does
        beside its tape (host reads, copies, off-tape launches: the chain-break and --graph evidence, taken on the
        first pass) is not watched again on the later ones unless write-after-read is (observe.recordings). Its
        launches then cost what they cost under python: ~1,500 hooked launches were ~10 ms of a cartpole pass."""
        return (
            self.config.watch_inputs == "first"
            and self.recordings.watches(tape) == (None, None)
            and not self.use.active
            and self.blame is None
        )

    def on_tape_exit(self, tape) -> None:
        if self._repeat is tape:
            self._repeat = None
            self.window.launches(not self.window.light)
        if capturing():  # its launches run in the graph, where Python sees none: replayed from copies later
            self.graphs.recorded_tape(tape)
            return
        if self.window.light and not self.window.full(self.backwards + 1):
            return
        with self.guard("recording"):
            self.recordings.exited(tape)

    def on_launch(self, call, run):
        if self.blame is not None and self.blame.recording:
            recording = active_tape()
            if recording is not None:
                self.blame.before_launch(call, recording)
        if self.window.light:
            return run()
        recording = active_tape()
        tape_watch, inputs = self.recordings.watches(recording)
        quiet = tape_watch is None and inputs is None and not self.use.active
        if recording is not None and quiet and call.get("record_tape", True):
            return run()  # a forward launch with nothing to watch: the common case costs a few lookups
        if capturing():
            return run()  # recorded into a graph, not run: nothing to fingerprint or read
        arguments, found, war, use = [], [], None, None
        with self.guard("launch"):
            arguments = call.arguments()
            found = updates(call, arguments, self.book.by_pointer()) if recording is None else []
            self.causes.off_tape(call, arguments, recording, self._moved)
            war = tape_watch.before(call, arguments) if tape_watch is not None and call.recorded else None
            use = self.use.before(call, arguments, found)
        result = run()
        with self.guard("launch"):
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
        if self.window.lane and not self.before_backward and not capturing():
            return self._light_backward(run, tape, loss, grads)  # decided when the last one ended (most of a run)
        for callback in self.before_backward:
            callback()
        if capturing():  # recorded into a graph, not run: the replays of that graph are the backwards
            self.graphs.recorded_backward(tape, loss, grads)
            return run()
        number = self.backwards + 1
        for part in self._beginning:
            if not part.idle(number - 1):  # most backwards of a long run: no event built, no call
                part.on_backward_begin(BackwardEvent(tape, loss, grads, number))  # exec's launch tests
        if not self.window.full(number) and self._stays_light(tape):
            return self._light_backward(run, tape, loss, grads)
        self.window.arm()
        self.window.audited += 1
        skipped = None
        with self.guard("before backward"):  # each part guards itself; this keeps the program safe from the rest
            skipped = self._before_backward(tape, loss, grads)
        if skipped:
            if self.config.stop_on_dangling:
                raise DanglingAdjointStop(skipped)
            return None
        with self.guard.ignoring():  # the backward's own launches and copies are not the program's
            self.window.launches(False)  # passed through untouched anyway: Warp's own for the adjoints' ~1 µs each
            try:
                result = run()
            finally:
                self.window.launches(not self.window.light)
        with self.guard("after backward"):
            self._after_backward(tape, loss, grads)
        self._tell_driver()
        return result

    def on_zero(self, tape, run):
        if self.window.light or capturing():
            return run()
        with self.guard.ignoring():
            result = run()
        if not self.zero.inside and not self._other_computation(tape):
            with self.guard("zero audit"):
                self.zero.zeroed(f"tape.zero() at {short(caller_site())}")
        return result

    def _other_computation(self, tape) -> bool:
        """``tape`` recorded a computation of its own and is not the last backward's: zeroing it is that
        computation's business (the next unittest's ``tape.reset()``), not the zero step of the last backward. A
        tape that recorded nothing (``wp.Tape().zero()``) is the program's zero step, however mistaken."""
        last = self._last[0] if self._last is not None else None
        return (
            last is not None
            and tape is not last
            and (bool(tape.launches or tape.gradients) or self.recordings.recorded(tape))
        )

    def on_host_read(self, array) -> None:
        if self.window.light or capturing():
            return
        with self.guard("host read"):
            self.causes.host_read(array)
            if self.use.active:
                self.use.read(array)

    def on_copy(self, dest, src, frame) -> None:
        if self.window.light or capturing():
            return
        self.causes.copy(dest, src, frame)

    # -- the audit window (observe.cadence) ----------------------------------------------------------------------
    def _leave_window(self) -> None:
        """The cadence leaves an audited window: its zero step is judged, its iteration closed, and what it watched
        (leftovers, the gradients' use, the recordings' inputs) ends, in every part too."""
        self.zero.flush()
        self.zero.close_window()
        self._close()
        for part in self.parts:
            part.on_window_leave()  # the leftovers, recordings' watches, the gradients read between backwards
        self._last, self._moved, self._leaf_values = None, False, None

    def _stays_light(self, tape) -> bool:
        structs = self.arguments.struct_roots or self.pointers.watching  # none (most runs): nothing to ask
        clean = functools.partial(self.pointers.clean, tape, self.arguments, self.guard) if structs else None
        return self.window.stays_light(self.log.growth.following, clean)

    def _light_backward(self, run, tape, loss, grads):
        self.backwards += 1
        result, finite = self.window.unaudited(run, self.book.gradients)
        if not finite:
            with self.guard("nonfinite sentinel"):
                self._late_audit(tape, loss, grads)
        self.window.after_light(self.backwards)
        if self.after_backward:
            self._tell_driver()
        return result

    def _asks_more(self) -> bool:
        """Besides the parts and the cadence, what audits a backward: struct pointers to judge, a growing loss."""
        return bool(self.arguments.struct_roots or self.pointers.watching or self.log.growth.following)

    def _late_audit(self, tape, loss, grads) -> None:
        """A param's gradient went non-finite on a backward the cadence skipped: what can still be read after it
        (every gradient's statistics, what the tape reached) is recorded as an audited backward of its own, and
        the window after it is watched (the update that consumes it, the zero step)."""
        self.window.arm()
        self.window.audited += 1
        self._it = Iteration(self.backwards, boundary=True, backwards=1, site=caller_site())
        self.names.new_event()
        self.names.tape = tape
        self.arguments.update(tape)
        self.book.note_tape(tape, self.arguments.unique, loss, grads, self.names.label)
        self._after_backward(tape, loss, grads)

    def _tell_driver(self) -> None:
        """A backward ran, audited or not: the driver's callbacks (exec refreshes --output)."""
        for callback in self.after_backward:
            with self.guard("after backward (driver)"):
                callback()

    # -- backward ---------------------------------------------------------------------------------------------
    def _before_backward(self, tape, loss, grads) -> str | None:
        """Open the iteration (bookkeeping that never fails), then gather the evidence, each part on its own: a
        part that fails is an InternalError and the others still run."""
        with self.guard("zero audit"):
            self.zero.flush()
        boundary = False
        with self.guard("iteration"):
            boundary = self._boundary()
        # gradients read since the last backward (Jacobian rows)
        self.causes.rows.before(BackwardEvent(tape, loss, grads, self.backwards + 1), boundary)
        if self.config.auto_iterations or self._it is None:
            self.zero.close_window()  # the last backward's gradients: their use ends here
        if self._last is not None and boundary and not self.leftovers.audited:
            with self.guard("zero audit"):
                self.arguments.update(tape)  # a new iteration, no zero step since the last: what this one adds to
                self.zero.audit(only_left=self.arguments.gradient_pointers())
        if self.config.auto_iterations or self._it is None:
            self._close()
            self._it = Iteration(self.backwards + 1, boundary)
        it = self._it
        self.backwards += 1
        it.backwards += 1
        it.site = it.site or caller_site()
        seed = loss if loss is not None else next(iter(grads or ()), None)  # backward(grads={array: seed})
        if seed is not None:
            self.devices.setdefault(str(getattr(seed, "device", "?")))
        self.causes.note_seeds(loss, grads, it)  # grads=: are the seeded outputs and seeds finite?
        self.names.new_event()
        self.names.tape = tape
        it.hazards, it.identical = self.recordings.take_hazards()
        with self.guard("params"):
            self.arguments.update(tape)
            self.book.note_tape(tape, self.arguments.unique, loss, grads, self.names.label)
        if it.backwards == 1:
            with self.guard("leftovers"):
                self.zero.residue(it)
        with self.guard("changed inputs"):
            it.changed = self.recordings.changed(tape)
        with self.guard("struct pointers"):
            it.observations = self.pointers.audit(self.arguments.struct_roots, first=self.backwards == 1)
        return self.pointers.dangling(it, self.backwards, self.config.stop_on_dangling)

    def _after_backward(self, tape, loss, grads) -> None:
        import warp as wp

        with contextlib.suppress(Exception):
            wp.synchronize()
        it = self._it
        self._last, self._moved = (tape, loss, grads), False
        it.launches = len(tape.launches)
        measured = {k: a for k, a in self.book.measured().items() if a.grad is None or readable(a.grad)}
        with self.guard("gradients"):
            it.loss = values.scalar(loss) if loss is not None else it.loss
            it.stats = self.reader.measure(measured)
            produced = [
                (a.grad, a, it.stats[k], self.names.gradient_subject(a))
                for k, a in measured.items()
                if it.stats.get(k) is not None
            ]
            self.use.start(produced)
        event = BackwardEvent(tape, loss, grads, self.backwards, measured)
        for part in self.parts:
            part.on_backward_end(event, it)  # what the tape reached (zero step), the causes, Jacobian rows, --graph
        with self.guard("iteration"):
            self._leaf_values = values.checksums(self.book.measured().values()) if not self.book.params() else None

    def _boundary(self) -> bool:
        """A new iteration: the driver opened one, an update moved a param, or (no param known) a leaf moved."""
        if self._it is not None and not self.config.auto_iterations:
            return self._it.boundary and self._it.backwards == 0
        if self._moved:
            return True
        if self._leaf_values is not None and not self.book.params():
            return values.checksums(self.book.measured().values()) != self._leaf_values
        return False

    # -- closing an iteration ------------------------------------------------------------------------------------
    def _close(self) -> PassRecord | None:
        it, self._it = self._it, None
        if it is None or it.backwards == 0 and not it.extra:
            return None
        from gradcheck.measure.struct_audit import pointer_issue

        if it.kept is None:
            it.settle_residue(self.leftovers.kept())
        self.reader.commit()
        self.leftovers.new_iteration()
        record = it.record(tuple(pointer_issue(o) for o in it.observations))
        self.log.add_iteration(it, record, self.book.measured(), self.reader, self.names, self.device)
        return record
