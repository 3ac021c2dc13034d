"""The default adjoint test of ``gradcheck exec`` and ``gradcheck.audit()``: every kernel the program differentiates,
tested once on the values it really ran on.

The class of bug users cannot see is a kernel whose adjoint is wrong while its forward is right (nested dynamic loops,
a value set before a run-time loop, ``continue`` in a loop, a wrong ``@wp.func_grad``): the loss goes down, only more
slowly. ``--blame`` tests every launch of one backward; this tests, by default, the *first audited launch of each
distinct kernel* (gradcheck.source.kernel_signature: again when its argument types change, or when a run-time loop it
reads goes from at most one iteration to more), with the same per-launch machinery (gradcheck.rerun.launch_check),
so over a run every kernel is tested at a cost that does not grow with training length.

How it copies what a launch ran on: the program's first fresh recording is copied whole (every launch's arguments,
as ``--blame`` does, within TEST_BUDGET_BYTES), so a launch that fails alone can be tested with its neighbours (a
split adjoint: Newton's Featherstone Cholesky and solve). Later recordings are watched only for kernels not yet
tested; such a launch alone is copied. A launch that fails alone there is no verdict yet: the next recording is
copied whole and the kernel's first launch in it tested with its neighbours. Only then, or when it fails alone with
no neighbour to share its adjoint, is the disagreement an error. A run that ends first leaves it no verdict, said so.

The tests wait, as ``--blame``'s do, until the program has used the gradients (its next recording, its next
backward, its end): only then are its params known, the arrays it updates, whose gradient path decides which inputs
are perturbed. Everything runs on private copies; the program's arrays and tape are never touched.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from gradcheck.model.trace import DEFAULT_ADJOINT_TEST, BlameResult, LaunchVerdict

TEST_BUDGET_BYTES = 256 << 20  # copies of one recording's forward values; a reserve as large again for lone launches
RETRIES = 3  # launches of a kernel tried while none can be tested (off the gradient path, captured)
WRONG = ("mismatch", "assigns")
RETRIED = (
    "launched during graph capture",
    "no float input to perturb",
    "over the memory budget",
    "its module changed since it ran",
)


@dataclass
class _Recording:
    """One fresh tape's launches while it records: copied whole (``full``) or only the launches to test."""

    recorder: object
    full: bool
    selected: list = field(default_factory=list)  # (tape position, test key) of the launches to test
    raw: list = field(default_factory=list)  # launches not yet recorded (nothing selected so far): their calls


class KernelTests:
    """Which launches to test, their copies, and the verdicts, one per kernel and argument types."""

    def __init__(self, cadence) -> None:
        self.cadence = cadence
        self.verdicts: dict[tuple, LaunchVerdict] = {}  # test key → its final verdict
        self._grown: dict[tuple, set[int]] = {}  # test key → its run-time loops seen iterating more than once
        self._tries: dict[tuple, int] = {}
        self._lone: dict[tuple, LaunchVerdict] = {}  # failed alone, waiting for a recording copied whole
        self._recordings: dict[int, tuple[object, _Recording]] = {}
        self._pending: list[tuple[_Recording, dict | None]] = []
        self._copied_whole = False
        self._captured: dict[int, _Recording] = {}  # id(tape) → its captured forward, while it is run again
        self._waiting: list = []  # captured forwards' recordings, tested after the graph's next backward is used
        self.notes: list[str] = []
        self.seconds = 0.0
        self.why = DEFAULT_ADJOINT_TEST

    # -- the protocol the observer drives (gradcheck.observe.blame_watch.BlameHooks) ----------------------------
    @property
    def recording(self) -> bool:
        return bool(self._recordings)

    @property
    def pending(self) -> bool:
        return bool(self._pending)

    def idle(self, backwards_done: int) -> bool:
        """Nothing copied, waiting or pending, every kernel seen tested or waiting for no recording, and the next
        backward not audited: its recording is not watched and its backward hands nothing on."""
        return (
            self._copied_whole
            and not (self._recordings or self._pending or self._waiting or self._lone)
            and not self.cadence.full(backwards_done + 1)
        )

    def on_tape_enter(self, tape, backwards_done: int) -> None:
        """A fresh recording starts: watched when its backward is audited, or when a lone failure waits for one.
        Not one recorded into a graph capture: nothing runs then (see ``captured``)."""
        whole = not self._copied_whole or bool(self._lone)
        if not (whole or self.cadence.full(backwards_done + 1)) or id(tape) in self._recordings or tape.launches:
            return
        from gradcheck.warp_compat import capturing

        if capturing():
            return
        from gradcheck.rerun.launch_record import LaunchRecorder

        recorder = LaunchRecorder(TEST_BUDGET_BYTES, keep_going=True)
        self._drop_unfinished()
        self._recordings[id(tape)] = (tape, _Recording(recorder, full=whole))
        self._copied_whole = True

    def _drop_unfinished(self) -> None:
        """A recording no backward came for (an evaluation forward, a tape recorded and dropped) is let go once
        another starts, beside the latest (a program may record two tapes before their backwards): its copies
        freed, its tape not kept alive, the launch switch not held on; its kernels are tried again later."""
        while len(self._recordings) > 1:
            _tape, recording = self._recordings.pop(next(iter(self._recordings)))
            for _position, key in recording.selected:
                self._grown.pop(key, None)

    def before_launch(self, call, tape) -> None:
        entry = self._recordings.get(id(tape))
        if entry is None or not call.recorded:
            return
        from gradcheck.tape.launch_access import call_access

        arguments = (call.kernel, call.get("dim"), call.inputs, call.outputs, call.options())
        self._record(entry[1], arguments, call_access(call))

    def _record(self, recording: _Recording, arguments: tuple, access=None) -> None:
        """One launch (kernel, dim, inputs, outputs, options) of a recording: selected for a test or not, copied
        when the recording is copied whole or it is selected. ``access``: the launch's, when the caller has it."""
        kernel, _dim, inputs, outputs, _options = arguments
        key = self._select(kernel, list(inputs) + list(outputs), recording)
        recorder = recording.recorder
        if key is None and not recording.full and not recording.selected:
            recording.raw.append(arguments)  # nothing to test yet: recorded only if something is
            return
        self._flush(recording)
        if key is not None:
            recording.selected.append((len(recorder.launches), key))
        recorder.before(*arguments, copy=recording.full or key is not None, access=access)
        if recording.full and recorder.over_budget_at is not None:
            recording.full = False  # too large to copy whole: only the launches to test, from the reserve
            recorder.budget += TEST_BUDGET_BYTES

    def captured(self, tape):
        """A forward captured into a graph, run again from copies before the graph's first replay (CUDA: its second):
        the first point its launches can be copied. Recorded whole, as a first recording; the callback for each
        launch (gradcheck.observe.rewrites.replay_captured)."""
        from gradcheck.rerun.launch_record import LaunchRecorder

        recording = _Recording(LaunchRecorder(TEST_BUDGET_BYTES, keep_going=True), full=True)
        self._captured[id(tape)] = recording

        def before(kernel, dim, inputs, outputs, options) -> None:
            self._record(recording, (kernel, dim, inputs, outputs, options))

        return before

    def captured_done(self, tape, backward, failed: str | None) -> None:
        """The captured forward's replay is over (``failed``: why it could not run): its tests wait for the graph's
        backward to be used, as a recording's do; a replay that could not run is said in the report."""
        recording = self._captured.pop(id(tape), None)
        if failed is not None or recording is None:
            self.notes.append(f"a forward captured in a graph was not tested: {failed}")
            for _position, key in recording.selected if recording is not None else ():
                self._grown.pop(key, None)
            return
        if not recording.selected:
            return
        if backward is None:  # the backward runs outside the graph, on this tape: its recording is this one
            self._recordings[id(tape)] = (tape, recording)
            return
        _tape, loss, grads = backward
        _losses(recording.recorder, tape, loss, grads)
        self._waiting.append((recording, grads))

    def on_backward(self, tape, loss, grads, number: int) -> None:
        self._pending += self._waiting  # a captured forward's: tested once this backward's gradients are used
        self._waiting = []
        entry = self._recordings.pop(id(tape), None)
        if entry is None or not entry[1].selected:
            return
        recording = entry[1]
        self._flush(recording)
        _losses(recording.recorder, tape, loss, grads)
        self._pending.append((recording, grads))

    def settle(self, params) -> None:
        """The gradients have been used (or the program ended): the selected launches are tested."""
        pending, self._pending = self._pending, []
        started = time.perf_counter()
        try:
            for recording, _grads in pending:
                self._test(recording, params)
        finally:
            self.seconds += time.perf_counter() - started

    def failed(self, why: str) -> None:
        """The tests could not run on this program: every kernel waiting for one is listed with the reason."""
        for recording, _grads in self._pending:
            for position, key in recording.selected:
                launch = recording.recorder.launches[position]
                self.verdicts.setdefault(
                    key, LaunchVerdict(position, launch.kernel.key, launch.where, "not-checked", note=why)
                )
        self._pending, self._recordings = [], {}

    @property
    def result(self) -> BlameResult:
        """The verdicts so far, one per kernel and argument types; a lone failure never retested is no verdict."""
        verdicts = list(self.verdicts.values())
        for key, lone in self._lone.items():
            if key not in self.verdicts:
                verdicts.append(_unconfirmed(lone))
        notes = list(dict.fromkeys(self.notes))
        tested = [v for v in verdicts if v.status not in ("not-checked",)]
        if verdicts and not tested:
            notes.append("no kernel could be tested: see the reasons")
        note = "; ".join(notes) or None
        return BlameResult(tuple(verdicts), self.why, None, note, self.seconds)

    # -- which launches -------------------------------------------------------------------------------------------
    def _select(self, kernel, values, recording: _Recording):
        """The launch's test key when it is to be tested now (its kernel and argument types untested, a run-time
        loop iterating more than once for the first time, or a lone failure to test with its neighbours)."""
        from gradcheck.source.kernel_signature import signature

        key, loops = signature(kernel, values)
        if any(k == key for _p, k in recording.selected):
            return None  # its first launch on this recording is the one tested
        if key in self._lone:
            return key if recording.full else None
        grown = {i for i, many in enumerate(loops) if many}
        seen = self._grown.get(key)
        if seen is None or not grown <= seen:
            if seen is not None and key in self.verdicts and self.verdicts[key].status in WRONG:
                return None  # already wrong: nothing more to learn
            self._grown[key] = (seen or set()) | grown
            self.verdicts.pop(key, None)  # its earlier verdict did not cover these iterations
            return key
        return None

    def _flush(self, recording: _Recording) -> None:
        for arguments in recording.raw:
            recording.recorder.before(*arguments, copy=False)
        recording.raw = []

    # -- the tests -------------------------------------------------------------------------------------------------
    def _test(self, recording: _Recording, params) -> None:
        from gradcheck.model.options import FDOptions
        from gradcheck.observe.blame_watch import recording_leaves
        from gradcheck.rerun.launch_check import check_selected
        from gradcheck.warp_compat.runtime import no_active_tape

        recorder = recording.recorder
        whole = recording.full and recorder.over_budget_at is None
        positions = [position for position, _key in recording.selected]
        with no_active_tape():
            verdicts = check_selected(
                recorder, list(params or recording_leaves(recorder)), FDOptions(), positions, whole
            )
        trained = bool(params) or _moved(recorder)  # the program updates params from their gradients
        for (_position, key), verdict in zip(recording.selected, verdicts):
            verdict = replace(verdict, trained=trained)
            self._decide(key, verdict, whole, recorder)

    def _decide(self, key, verdict: LaunchVerdict, whole: bool, recorder) -> None:
        if verdict.status in WRONG:
            if whole or not _has_neighbours(recorder, verdict.index):
                self._lone.pop(key, None)
                self.verdicts[key] = verdict
            else:
                self._lone[key] = verdict  # a split adjoint not ruled out: tested again with its neighbours
            return
        self._lone.pop(key, None)
        if verdict.status == "not-checked" and (verdict.note or "").startswith(RETRIED):
            self._tries[key] = self._tries.get(key, 0) + 1
            if self._tries[key] < RETRIES:
                self._grown.pop(key, None)  # its next launch is tried
        self.verdicts[key] = verdict


def _losses(recorder, tape, loss, grads) -> None:
    """What the recording's backward starts from: the copies on its tape (edges of the path), then its loss, the
    arrays ``grads=`` seeds, or, with neither, the arrays seeded by hand (``.grad.fill_``, or inside a graph)."""
    from gradcheck.rerun.launch_record import hand_seeded, note_copies

    note_copies(recorder, tape)
    recorder.loss_id = id(loss) if loss is not None else None
    if loss is None:
        recorder.seeds = tuple(grads) if grads else hand_seeded(recorder)


def _moved(recorder) -> bool:
    """Whether the program moved a leaf of the recording (an array with a gradient read before anything wrote it)
    since the recording read it, by any means (a kernel, ``w.assign(w.numpy() - lr * w.grad.numpy())``, torch): it
    trains through the recording. A test of a mechanism, a Jacobian probe, leave their inputs as they were."""
    from gradcheck.measure.fingerprints import bytes_crc
    from gradcheck.measure.liveness import readable
    from gradcheck.observe.blame_watch import recording_leaves

    for leaf in recording_leaves(recorder):
        if not readable(leaf):  # memory the program may have freed is never read
            continue
        for launch in recorder.launches:
            copy = launch.pre.get(id(leaf))
            if copy is not None:
                if bytes_crc(copy) != bytes_crc(leaf):
                    return True
                break
    return False


def _has_neighbours(recorder, index: int) -> bool:
    """Whether the launch has neighbours its adjoint may be split with: the units a recording copied whole would
    test it in (gradcheck.rerun.launch_check)."""
    from gradcheck.rerun.launch_check import has_units

    return has_units(recorder.launches, recorder.launches[index])


def _unconfirmed(lone: LaunchVerdict) -> LaunchVerdict:
    """A launch that failed alone on a recording whose neighbours were not copied, never tested with them."""
    return replace(
        lone,
        status="no-verdict",
        note=f"it disagrees alone (adjoint {lone.ad:.6g} vs FD {lone.fd:.6g}), but the launches around it were not "
        "copied, and the program recorded no later tape to test it with them: an adjoint split across launches "
        "(correct together) is not ruled out; exec --blame tests its backward whole",
    )
