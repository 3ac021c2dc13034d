"""The recording hooks' switch (gradcheck.warp_compat.hooks.TapeSwitch): between audited windows ``Tape.__enter__``,
``__exit__`` and ``zero`` are Warp's own (a recording costs what it costs under python), ``backward`` stays hooked;
an inner observer installed meanwhile finds the outer one's hooks in place, so both see the program's recordings; and
under an audit the hooks are off between windows and on for the recording before each audited backward."""

from __future__ import annotations

import warp as wp

import gradcheck
from gradcheck.warp_compat.hooks import PassingEvents, observed

_ORIGINAL = {name: wp.Tape.__dict__[name] for name in ("__enter__", "__exit__", "backward", "zero")}


class Events(PassingEvents):
    """The smallest observer the hooks drive: it counts what it was told."""

    wants_launches = False

    def __init__(self) -> None:
        self.told: list[str] = []

    def on_tape_enter(self, tape):
        self.told.append("enter")

    def on_tape_exit(self, tape):
        self.told.append("exit")

    def on_backward(self, tape, loss, grads, run):
        self.told.append("backward")
        return run()

    def on_zero(self, tape, run):
        self.told.append("zero")
        return run()


@wp.kernel
def _square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


def _step(x, y):
    tape = wp.Tape()
    with tape:
        wp.launch(_square, dim=x.shape[0], inputs=[x], outputs=[y], device="cpu")
    tape.backward(grads={y: wp.ones(y.shape[0], dtype=float, device="cpu")})
    tape.zero()


def _arrays():
    wp.init()
    x = wp.array([1.0, 2.0], dtype=float, requires_grad=True, device="cpu")
    return x, wp.zeros(2, dtype=float, requires_grad=True, device="cpu")


def test_off_leaves_warps_own_recording_methods_and_keeps_backward_hooked():
    x, y = _arrays()
    events = Events()
    with observed(events):
        events.tape_switch.off()
        assert all(wp.Tape.__dict__[n] is _ORIGINAL[n] for n in ("__enter__", "__exit__", "zero"))
        assert wp.Tape.__dict__["backward"] is not _ORIGINAL["backward"]
        _step(x, y)
        assert events.told == ["backward"]
        events.tape_switch.on()
        _step(x, y)
        assert events.told == ["backward", "enter", "exit", "backward", "zero"]
    assert all(wp.Tape.__dict__[n] is _ORIGINAL[n] for n in _ORIGINAL)  # uninstalled: Warp's own again


def test_an_inner_observer_installed_while_the_outer_is_off_still_lets_the_outer_see_recordings():
    x, y = _arrays()
    outer, inner = Events(), Events()
    with observed(outer):
        outer.tape_switch.off()
        with observed(inner):
            outer.tape_switch.off()  # refused while another observer is installed: it wraps the outer's hooks
            _step(x, y)
        assert inner.told == ["enter", "exit", "backward", "zero"]
        assert outer.told == ["enter", "exit", "backward", "zero"]  # the program's recording reached both


def test_under_an_audit_recordings_are_unhooked_between_windows_and_hooked_before_an_audited_backward():
    from gradcheck.observe.config import Cadence

    x, y = _arrays()
    hooked = []
    with gradcheck.audit(keep_going=True) as audit:
        cadence = audit._audit.observer.window.cadence
        for _ in range(Cadence().first + 200):
            _step(x, y)
            hooked.append(wp.Tape.__dict__["__enter__"] is not _ORIGINAL["__enter__"])
    # after backward k, the recording of backward k + 1 is hooked exactly when that backward is audited (or the
    # audited window is still being left)
    for k, on in enumerate(hooked, start=1):
        if k > cadence.first and not cadence.full(k) and not cadence.full(k - 1):
            assert on is cadence.full(k + 1), k
    assert not all(hooked) and any(hooked[cadence.first + 1 :])
    assert audit.result.passes == cadence.first + 200 and not audit.findings
