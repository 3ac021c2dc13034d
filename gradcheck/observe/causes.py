"""The observer's part that says "why": after a backward, where a zero gradient's chain to the loss breaks, where a
NaN or an exploding adjoint started, and the picture ``--graph`` draws; before it, what moved values beside the tape.

Each is looked for only when there is something to explain (a param whose gradient is zero or absent, a gradient
that holds NaN/Inf or exceeds --max-norm), once a param or kind, so a long run pays for it a few times at most:
gradcheck.diagnose.chain_break, gradcheck.diagnose.backward_origin, gradcheck.tape.flow_graph do the work.
"""

from __future__ import annotations

from gradcheck.observe.iteration import Iteration
from gradcheck.observe.parts import BackwardEvent, ObserverPart, PartContext
from gradcheck.observe.row_reads import RowReadHooks
from gradcheck.observe.unrecorded import UnrecordedLog, copy_unrecorded
from gradcheck.warp_compat.runtime import active_tape

MAX_DIAGNOSED = 16  # params whose chain break is looked for over a run


class Causes(ObserverPart):
    """The observer's part that explains: after each audited backward, where a chain breaks, where a NaN or an
    explosion past the judged norm (``config.max_norm``) started, the --graph picture; meanwhile, what moves values
    beside the tape (the unrecorded log) and the gradients read between backwards (Jacobian rows)."""

    def __init__(self, context: PartContext) -> None:
        self.context = context
        self.guard, self.names, self.book = context.guard, context.names, context.book
        self.rows = RowReadHooks(context)  # the gradients read between backwards (observe.row_reads)
        self.unrecorded = UnrecordedLog()  # what moved values beside the tapes since the last backward
        self._diagnosed: set[str] = set()  # params whose chain break was looked for (once each)
        self.max_norm = context.config.max_norm  # where an exploding adjoint is looked for: the norm the check judges
        self._origins_done: set[str] = set()  # kinds whose origin was looked for (once each: it costs a few backwards)
        self.dataflow = None  # --graph (config.keep_dataflow): one backward's dataflow picture (trace field dataflow)
        self._dataflow_marked = False

    def on_window_leave(self) -> None:
        self.rows.forget()

    def recording_entered(self, tape) -> None:
        """An audited recording starts: what moves values beside the tape is placed against it."""
        self.unrecorded.entered(tape)

    def on_backward_end(self, backward: BackwardEvent, it: Iteration) -> None:
        """Right after a backward (its gradients measured into ``it.stats``): what explains them, and whether they
        grow with the loss update after update (observe.divergence: a program that trains); the log of what moved
        values beside the tape starts afresh."""
        tape, loss, grads, measured = backward.tape, backward.loss, backward.grads, backward.measured
        self.rows.after(backward, it)  # the gradients read between backwards (Jacobian rows)
        if not self.context.config.fixed_params:
            with self.guard("divergence watch"):
                # every measured array, leaves too: a program that updates x on the host (x.assign(x.numpy() - lr
                # * g)) runs no update launch, and only the measured step against the gradient shows it trains x
                sites = {k: self.book.update_sites.get(id(a)) for k, a in measured.items()}
                self.context.log.growth.after_backward(it.index, it.loss, it.stats, measured, sites)
        with self.guard("chain breaks"):
            self._chain_breaks(tape, loss, grads, measured, it)
        with self.guard("nonfinite origin"):
            self._origins(tape, loss, grads, it)
        if self.context.config.keep_dataflow:
            with self.guard("dataflow picture"):
                self._keep_picture(backward, it)
        self.unrecorded.clear()

    def final_norms(self) -> dict:
        """key → the value norm of each param now (one launch): vanishing asks whether the program moved it."""
        from gradcheck.measure.liveness import readable
        from gradcheck.observe import values

        found = {}
        with self.guard("final values"):
            if not self.context.config.fixed_params:
                params = {k: a for k, a in self.book.measured().items() if self.book.is_param(a) and readable(a)}
                norms = values.norms(params.values(), self.context.config.device)
                found = {k: norms[id(a)] for k, a in params.items() if id(a) in norms}
        return found

    def note_seeds(self, loss, grads, it: Iteration) -> None:
        """Before a backward seeded with ``grads=``: whether its outputs' values and seeds are finite, the evidence
        that tells a NaN the forward made from one backward made alone when there is no loss (gradcheck.observe.seeds)."""
        if loss is not None or not grads:
            return
        from gradcheck.observe.seeds import merged, seeded_backward

        with self.guard("seeded outputs"):
            it.seeded = merged(it.seeded, seeded_backward(loss, grads, self.names.label))

    def off_tape(self, call, arguments, recording, moved: bool) -> None:
        """A launch the tape will not hold (no tape recording, or ``record_tape=False``), for the chain-break walk
        (``moved``: an update ran since the last backward)."""
        self.rows.launch(call, arguments, moved)  # a launch that loads a gradient read between backwards
        if recording is None:
            self.unrecorded.launch(call, arguments, "launched while no tape was recording")
        elif not call.get("record_tape", True):
            self.unrecorded.launch(call, arguments, "launched with record_tape=False")

    def host_read(self, array) -> None:
        if getattr(array, "ptr", None):
            from gradcheck.model.sites import caller_site

            site = caller_site()
            self.unrecorded.host_read(array, site)
            self.rows.read(array, "host read", site)

    def copy(self, dest, src, frame) -> None:
        """A ``wp.copy`` the program is about to make: one Warp leaves off the tape is where a gradient chain can
        break (told before it runs, so that the copy is called from the hook's frame, which Warp counts as its own)."""
        with self.guard("copy"):
            from gradcheck.warp_compat import called_from_warp, is_array, program_site

            # indexed and fabric arrays have no one data pointer: no edge the walk could follow
            if is_array(dest) and is_array(src) and getattr(dest, "ptr", None) and getattr(src, "ptr", None):
                why = copy_unrecorded(dest, src, active_tape() is not None)
                if why is not None:
                    self.unrecorded.copy(dest, src, program_site(frame), why, inside_warp=called_from_warp(frame))
                if not called_from_warp(frame):
                    self.rows.read(src, "wp.copy", program_site(frame))

    def _origins(self, tape, loss, grads, it: Iteration) -> None:
        """Where a NaN/Inf or a norm past --max-norm in a gradient started in this backward: the first launch, by
        bisection over the tape (gradcheck.diagnose.backward_origin); looked for at the first backward that shows it."""
        from gradcheck.diagnose.backward_origin import backward_origin

        stats = [s for s in it.stats.values() if s is not None]
        wanted = []
        if "nonfinite" not in self._origins_done and any(s.nonfinite for s in stats):
            wanted.append(("nonfinite", None))
        elif "growth" not in self._origins_done and any(s.norm > self.max_norm for s in stats):
            wanted.append(("growth", self.max_norm))
        for kind, threshold in wanted:
            self._origins_done.add(kind)
            origin = backward_origin(tape, loss, grads, kind=kind, threshold=threshold)
            if origin is not None:
                it.origins = (*it.origins, (kind, origin))

    def _keep_picture(self, backward: BackwardEvent, it: Iteration) -> None:
        """--graph: the first backward with something to mark (a chain break, a changed input), else the first."""
        from gradcheck.tape.flow_graph import FlowGraph

        tape, loss, grads = backward.tape, backward.loss, backward.grads
        marked = bool(it.breaks or it.changed or it.origins)
        if self.dataflow is not None and (self._dataflow_marked or not marked):
            return
        graph = FlowGraph(tape, list(self.unrecorded.events), self.unrecorded.recording_of(tape))
        arrays = self.book.measured().values()  # the params name what the tape holds only by pointer
        self.dataflow = graph.picture(self.names.label, loss, grads, backward=backward.number, arrays=arrays)
        self._dataflow_marked = marked

    def _chain_breaks(self, tape, loss, grads, measured: dict, it: Iteration) -> None:
        """Where the chain to the loss breaks, for each param (each leaf, when the program showed no param) whose
        gradient is zero or absent after this backward: looked for once a param, at most MAX_DIAGNOSED."""
        from gradcheck.diagnose.chain_break import diagnose

        params = self.book.params()
        chosen = {id(a) for a in params} if params else None
        targets = {}
        for key, array in measured.items():
            if key in self._diagnosed or (chosen is not None and id(array) not in chosen):
                continue
            stats = it.stats.get(key)
            if array.grad is None or (stats is not None and stats.nonzero == 0):
                targets[key] = array
        targets = dict(list(targets.items())[: max(0, MAX_DIAGNOSED - len(self._diagnosed))])
        if not targets:
            return
        self._diagnosed |= set(targets)
        it.breaks = it.breaks + diagnose(
            tape,
            loss,
            grads,
            targets,
            list(self.unrecorded.events),
            self.names.label,
            self.unrecorded.recording_of(tape),
        )
