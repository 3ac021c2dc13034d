"""One pass of ``gradcheck run``, exactly as a user's training loop would run it, shown to the observer.

restore params → fresh tape → forward() under the tape → backward (the scenario's, or tape.backward(loss)) →
after_backward() → the readout (where the loop reads gradients) → gradcheck's own --clip-norm → the scenario's
zero step (default tape.zero()). Params are restored from a snapshot taken after setup, so every pass sees the
same inputs and any difference between passes is the program's, not the tool's. The observer
(gradcheck.observe) sees everything the program does; the loop only tells it where a pass starts and ends and
where the loop reads its gradients.
"""

from __future__ import annotations

import contextlib
import gc
import math

from gradcheck.engine.scenario_hooks import backward, call, params_of, restore
from gradcheck.model.errors import ScenarioError


class PassLoop:
    def __init__(self, scenario, name: str, device: str, snapshots: dict, observer, progress=None, clip_norm=None):
        from gradcheck.measure.stats import StatsPlan

        self.scenario, self.name, self.device = scenario, name, device
        self.snapshots, self.observer, self.progress, self.clip_norm = snapshots, observer, progress, clip_norm
        self.records: list = []
        self.tape_backward_ran = False  # did backward run on the tape gradcheck recorded (not the scenario's own)?
        self._clip_plan = StatsPlan()
        self._custom_backward = callable(getattr(scenario, "backward", None))

    def run_pass(self, index: int, passes: int) -> None:
        import warp as wp

        scenario, name, observer = self.scenario, self.name, self.observer
        observer.begin_iteration(index)
        with observer.ignoring():
            restore(params_of(scenario, name), self.snapshots)
        params = self._params(index)
        # what forward() changes outside kernels after a launch read it, and a scenario's own backward code before
        # tape.backward: watched on the first pass (the runner's ObserverConfig, gradcheck.observe.input_watch)
        tape = wp.Tape()
        with tape:
            loss = call(name, "forward", scenario.forward)
        ran = backward(scenario, name, tape, loss)
        self.tape_backward_ran = self.tape_backward_ran or ran
        observer.note(loss=_scalar(loss))  # what forward() returned (a scenario's own backward may seed grads=)
        wp.synchronize_device(self.device)
        if callable(getattr(scenario, "after_backward", None)):
            call(name, "after_backward", scenario.after_backward)
            observer.readout("the readout after after_backward()", params)  # where the user's loop reads them
        if self.clip_norm:  # gradcheck's own clip, after the readout
            with observer.ignoring():
                observer.note(**self._clip(params))
        zero = getattr(scenario, "zero", None)
        with observer.zero_step("scenario.zero(tape)" if callable(zero) else "tape.zero()"):
            if callable(zero):
                call(name, "zero", zero, tape)
            else:
                tape.zero()
            wp.synchronize_device(self.device)
        record = observer.end_iteration()
        if record is not None:
            self.records.append(record)
        if self.progress is not None:
            self.progress(name, index, passes)

    def _params(self, index: int) -> dict:
        params = params_of(self.scenario, self.name)
        unknown = [key for key in params if key not in self.snapshots]
        if unknown:
            raise ScenarioError(
                f"{self.name}: params() returned a new key {unknown[0]!r} on pass {index}; return the same names on "
                "every call"
            )
        self.observer.declare(params)
        return params

    def _clip(self, params: dict) -> dict:
        """--clip-norm: clip the params' gradients together; the stats after and (total before, after)."""
        import warnings

        from gradcheck.clip import clip_grad_norm

        with_grad = [a for a in params.values() if getattr(a, "grad", None) is not None]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # non-finite gradients: the nonfinite check reports
            before = clip_grad_norm(with_grad, self.clip_norm) if with_grad else 0.0
        after = self.observer.reader.readout(params, self._clip_plan)
        total_after = math.sqrt(sum(s.sumsq for s in after.values() if s is not None))
        return {"clipped": after, "clip_total": (before, total_after)}


@contextlib.contextmanager
def frozen_heap():
    """Move everything setup() built into the GC's permanent generation for the passes; yields ``settle()``, called
    after each pass, which collects that pass's young garbage and freezes what survived of it too.

    The model, states and Warp/Newton modules live for the whole run and are never garbage during the
    passes, yet every full collection would traverse them again: with Newton loaded one costs ~0.2 s,
    about one pass, and lands every ~20 passes. What each pass keeps (its record, each param's reading) would
    otherwise make every later full collection longer: on a 70-pass cartpole run, ~20 ms every seventh pass.
    A young collection first (~1 ms) keeps a pass's own reference cycles from outliving it. Unfrozen (and
    collectable again) afterwards.
    """
    freeze = getattr(gc, "freeze", None)
    if freeze is None or not gc.isenabled():
        yield lambda: None
        return
    gc.collect()
    freeze()

    def settle() -> None:
        gc.collect(1)
        freeze()

    try:
        yield settle
    finally:
        gc.unfreeze()


def _scalar(loss) -> float | None:
    from gradcheck.warp_compat import is_array

    if is_array(loss) and loss.size == 1:
        try:
            return float(loss.numpy().reshape(-1)[0])
        except (TypeError, ValueError):
            return None
    return None
