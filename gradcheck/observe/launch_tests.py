"""The per-launch adjoint tests an unmodified program gets: the default one (every kernel's first launch,
gradcheck.observe.kernel_tests) and ``--blame`` (every launch of one backward, gradcheck.observe.blame_watch), behind
the one protocol the observer drives (gradcheck.observe.blame_watch.BlameHooks), their verdicts as one BlameResult.

Each test settles on its own: one that cannot replay this program is listed with the reason and costs the other
nothing, nor the program its report.
"""

from __future__ import annotations

from gradcheck.model.trace import BlameResult


class LaunchTests:
    """``blame``: a BlameWatch or None; ``kernels``: a KernelTests or None."""

    def __init__(self, blame=None, kernels=None) -> None:
        self.blame, self.kernels = blame, kernels
        self._parts = [part for part in (blame, kernels) if part is not None]
        if len(self._parts) == 1:  # asked before every backward of a long run: the one part's own answer
            self.idle = self._parts[0].idle

    @property
    def recording(self) -> bool:
        return any(part.recording for part in self._parts)

    @property
    def pending(self) -> bool:
        return any(part.pending for part in self._parts)

    def idle(self, backwards_done: int) -> bool:
        """No test copies, hands on or settles anything at the next recording and backward (most of a long run)."""
        return all(part.idle(backwards_done) for part in self._parts)

    def on_tape_enter(self, tape, backwards_done: int) -> None:
        for part in self._parts:
            part.on_tape_enter(tape, backwards_done)

    def before_launch(self, call, tape) -> None:
        for part in self._parts:
            if part.recording:
                part.before_launch(call, tape)

    def on_backward(self, tape, loss, grads, number: int) -> None:
        for part in self._parts:
            part.on_backward(tape, loss, grads, number)

    def captured(self, tape):
        """A callback for each launch of ``tape``'s captured forward as it is run again from copies, or None."""
        return self.kernels.captured(tape) if self.kernels is not None else None

    def captured_done(self, tape, backward, failed: str | None) -> None:
        self.kernels.captured_done(tape, backward, failed)

    def settle(self, params) -> None:
        for part in self._parts:
            if not part.pending:
                continue
            try:
                part.settle(params)
            except Exception as exc:  # noqa: BLE001 - a test that cannot replay this program must not cost its report
                part.failed(f"the probe failed: {type(exc).__name__}: {str(exc)[:200]}")

    @property
    def result(self) -> BlameResult | None:
        """--blame's verdicts first, then the default test's for kernels --blame did not test."""
        blame = self.blame.result if self.blame is not None else None
        kernels = self.kernels.result if self.kernels is not None else None
        if blame is None or kernels is None:
            return blame or kernels
        if blame.skipped:
            return kernels if kernels.verdicts else blame
        covered = {v.kernel for v in blame.verdicts}
        extra = tuple(v for v in kernels.verdicts if v.kernel not in covered)
        notes = "; ".join(n for n in (blame.note, kernels.note) if n) or None
        why = f"{blame.why}, and {kernels.why} elsewhere" if extra else blame.why
        return BlameResult(blame.verdicts + extra, why, None, notes, blame.seconds + kernels.seconds)
