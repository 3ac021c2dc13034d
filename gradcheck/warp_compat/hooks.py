"""Where gradcheck meets a running Warp program: the tape's methods, kernel launches, graph replays, host reads.

gradcheck's one observer (gradcheck.observe) sees a program only through the hooks installed here, whoever drives
the program (``gradcheck run``'s passes, ``gradcheck exec``'s unmodified script, ``gradcheck.audit()``):

- ``Tape.__enter__`` / ``Tape.__exit__``: a forward starts and ends recording;
- ``Tape.backward`` and ``Tape.zero`` (``Tape.reset`` calls ``zero``);
- every kernel launch, with its arguments by name: ``warp.launch`` and the module-level ``launch`` that Warp's
  own helpers call directly (``wp.launch_tiled`` does: a patch of ``wp.launch`` alone never sees it);
- ``wp.capture_launch``: a CUDA graph replay runs a captured backward without Python seeing it;
- ``array.numpy()``: the host reads an array (logging a gradient norm reads its gradient);
- ``wp.copy`` as the program calls it: a copy Warp leaves off the tape (it records one only while a tape records
  and both arrays have gradients) is where a gradient chain breaks unseen.

Each hook calls the observer *around* the original (``events.on_launch(call, run)`` gets ``run`` to call), so
the observer can look before and after. An observer that is busy (running its own statistics kernels) is
bypassed, and so is one that has said it needs no launches right now: a training loop pays one attribute test
per launch when nothing is being watched. A Warp release that renames any of this is fixed in this file.
"""

from __future__ import annotations

import contextlib
import functools
import sys

from gradcheck.warp_compat.launches import LAUNCH_METADATA, _internal_launch_module, _launch_signature
from gradcheck.warp_compat.runtime import active_tape


class LaunchCall:
    """One ``wp.launch`` call, its arguments read by name (positions from the signature of the running Warp)."""

    __slots__ = ("_args", "_kwargs", "_positions", "_defaults", "frame", "access")

    def __init__(self, args: tuple, kwargs: dict, positions: dict, defaults: dict, frame=None):
        self._args, self._kwargs, self._positions, self._defaults = args, kwargs, positions, defaults
        self.frame = frame  # the frame that called launch (the program's, or a Warp helper's such as launch_tiled)
        self.access = None  # its LaunchAccess, once a part asked (gradcheck.tape.launch_access.call_access)

    @property
    def site(self) -> str | None:
        """``file:line`` of the call: the program's, past Warp's own helpers (``wp.launch_tiled`` calls the
        launch itself)."""
        return program_site(self.frame)

    def get(self, name: str, default=None):
        if name in self._kwargs:
            return self._kwargs[name]
        position = self._positions.get(name)
        if position is not None and position < len(self._args):
            return self._args[position]
        return self._defaults.get(name, default)

    @property
    def kernel(self):
        return self.get("kernel")

    @property
    def inputs(self) -> list:
        return list(self.get("inputs") or [])

    @property
    def outputs(self) -> list:
        return list(self.get("outputs") or [])

    @property
    def adjoint(self) -> bool:
        return bool(self.get("adjoint", False))

    @property
    def recorded(self) -> bool:
        """Will Warp put this launch on the active tape? (Not an adjoint launch, not ``record_tape=False`` (a custom
        op whose backward is recorded by hand), not a ``record_cmd`` launch object.)"""
        from gradcheck.warp_compat.runtime import active_tape

        return (
            not self.adjoint
            and bool(self.get("record_tape", True))
            and not self.get("record_cmd", False)
            and active_tape() is not None
        )

    def arguments(self) -> list[tuple[str, object]]:
        """(argument name, value) in the kernel's order: its inputs, then its outputs."""
        labels = kernel_argument_names(self.kernel)
        values = self.inputs + self.outputs
        return [(labels[i] if i < len(labels) else f"arg{i}", v) for i, v in enumerate(values)]

    def options(self) -> dict:
        """What a replay of this launch needs besides kernel, dim and arguments (block_dim is not on every release)."""
        return {
            "device": self.get("device"),
            "max_blocks": self.get("max_blocks", 0),
            "block_dim": self.get("block_dim"),
            "where": self.site,
        }


def program_site(frame) -> str | None:
    """``file:line`` of ``frame``, or of the first frame above it outside Warp's own package."""
    while frame is not None and frame.f_back is not None and _is_warp_file(frame.f_code.co_filename):
        frame = frame.f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else None


def called_from_warp(frame) -> bool:
    """Whether ``frame`` runs Warp's own code (``wp.array(numpy)`` and ``assign`` call ``wp.copy`` themselves)."""
    return frame is not None and _is_warp_file(frame.f_code.co_filename)


def _is_warp_file(filename: str) -> bool:
    """A file of Warp's own package (its helpers), not a program's (Warp's examples and tests are programs)."""
    root = _warp_root()
    if not filename.startswith(root):
        return False
    return not filename[len(root) :].startswith(("examples", "tests"))


@functools.cache
def _warp_root() -> str:
    import os

    import warp

    return os.path.dirname(warp.__file__) + os.sep


def kernel_argument_names(kernel) -> list[str]:
    return [arg.label for arg in getattr(getattr(kernel, "adj", None), "args", ())]


@contextlib.contextmanager
def observed(events):
    """Install the hooks for ``events`` (an object with the methods below) while inside; restore on exit.

    ``events.busy``: bypass every hook (the observer's own work). ``events.wants_launches``: False lets launches go
    straight through. The methods: ``on_tape_enter(tape)``, ``on_tape_exit(tape)``,
    ``on_backward(tape, loss, grads, run)``, ``on_zero(tape, run)``, ``on_launch(call, run)``,
    ``on_capture_end(graph)``, ``on_graph_replay(graph, run)``, ``on_host_read(array)`` and, when it has one,
    ``on_copy(dest, src, frame)``, told before the copy runs (``program_site(frame)`` says where); each ``run`` calls the original and returns its result.
    ``events.launch_switch`` and ``events.tape_switch`` are set while installed (LaunchSwitch, TapeSwitch), and
    ``events.on_capture_begin()`` is told when a capture starts, if it has one.
    """
    import warp as wp

    for outer in _INSTALLED:  # nested: every outer observer's recording hooks on, so this one wraps them
        outer.tape_switch.on()
    module = _internal_launch_module()
    tape_originals = {name: wp.Tape.__dict__[name] for name in ("__enter__", "__exit__", "backward", "zero")}
    launches = (wp.launch, module.launch)
    capture, numpy = getattr(wp, "capture_launch", None), wp.array.__dict__["numpy"]
    capture_begin, capture_end = getattr(wp, "capture_begin", None), getattr(wp, "capture_end", None)
    tape_wrappers = _tape_wrappers(events, tape_originals)
    for name, wrapper in tape_wrappers.items():
        setattr(wp.Tape, name, wrapper)
    events.tape_switch = TapeSwitch(wp.Tape, tape_originals, tape_wrappers)
    watched = _watched(events, launches[0])
    watched_pair = (watched, watched if launches[1] is launches[0] else _watched(events, launches[1]))
    copy = wp.copy
    watched_copy = _copied(events, copy) if hasattr(events, "on_copy") else copy
    switch = LaunchSwitch(wp, module, launches, watched_pair, numpy, _read(events, numpy), (copy, watched_copy))
    switch.on()
    if capture is not None:
        wp.capture_launch = _replayed(events, capture)
    if capture_end is not None:
        wp.capture_end = _captured(events, capture_end)
    if capture_begin is not None and hasattr(events, "on_capture_begin"):
        wp.capture_begin = _capture_started(events, capture_begin)
    events.launch_switch = switch
    _INSTALLED.append(events)
    try:
        yield
    finally:
        _INSTALLED.remove(events)
        for name, original in tape_originals.items():
            setattr(wp.Tape, name, original)
        switch.off()
        if capture is not None:
            wp.capture_launch = capture
        if capture_end is not None:
            wp.capture_end = capture_end
        if capture_begin is not None:
            wp.capture_begin = capture_begin
        events.launch_switch = None


class LaunchSwitch:
    """The launch and host-read hooks, on or off. Between backwards the observer does not audit
    (gradcheck.observe.cadence), ``wp.launch`` and ``array.numpy`` are Warp's own again: a launch of a training
    loop then costs what it costs under python, where the wrapper cost a few microseconds of Python each."""

    def __init__(self, wp, module, originals, watched, numpy, read, copies=(None, None)) -> None:
        self._wp, self._module, self._originals, self._watched = wp, module, originals, watched
        self._numpy, self._read = numpy, read
        self._copy, self._watched_copy = copies
        self.active = False

    def on(self) -> None:
        if not self.active:
            self._set(self._watched, self._read)
            self._set_copy(self._copy, self._watched_copy)
            self.active = True

    def off(self) -> None:
        if self.active:
            self._set(self._originals, self._numpy)
            self._set_copy(self._watched_copy, self._copy)
            self.active = False

    def _set_copy(self, expected, new) -> None:
        if new is not None and self._wp.copy is expected:  # a program that replaced wp.copy keeps its own
            self._wp.copy = new

    def _set(self, launches, numpy) -> None:
        # only where the value is still the one this switch put there: a program (or another tool) that replaced
        # wp.launch since keeps its own
        current = (self._wp.launch, self._module.launch)
        expected = self._originals if launches is self._watched else self._watched
        if current[0] is expected[0]:
            self._wp.launch = launches[0]
        if self._module is not self._wp and current[1] is expected[1]:
            self._module.launch = launches[1]
        self._wp.array.numpy = numpy


class TapeSwitch:
    """The recording and zero hooks (``Tape.__enter__``, ``__exit__``, ``zero``), on or off; ``Tape.backward``'s
    stays (it counts backwards). Between audited windows (gradcheck.observe.cadence) a recording the observer would
    not watch then costs what it costs under python: the three wrappers and the observer's checks were ~6 µs of a
    ~60 µs training step. Off only while this observer is the only one installed (an inner one wraps whatever it
    finds, so it must find these), and only where the value is still the one this switch put there."""

    NAMES = ("__enter__", "__exit__", "zero")

    def __init__(self, tape_class, originals: dict, wrappers: dict) -> None:
        self._class = tape_class
        self._originals = {name: originals[name] for name in self.NAMES}
        self._wrappers = {name: wrappers[name] for name in self.NAMES}
        self.active = True

    def on(self) -> None:
        if not self.active:
            self._set(self._originals, self._wrappers)
            self.active = True

    def off(self) -> None:
        if self.active and len(_INSTALLED) == 1:
            self._set(self._wrappers, self._originals)
            self.active = False

    def _set(self, expected: dict, new: dict) -> None:
        for name in self.NAMES:
            if self._class.__dict__.get(name) is expected[name]:
                setattr(self._class, name, new[name])


def _tape_wrappers(events, originals: dict) -> dict:
    def __enter__(tape):
        result = originals["__enter__"](tape)
        if not _aside(events):
            events.on_tape_enter(tape)
        return result

    def __exit__(tape, *exc):
        result = originals["__exit__"](tape, *exc)
        if not _aside(events):
            events.on_tape_exit(tape)
        return result

    def backward(tape, loss=None, grads=None):
        if _aside(events):
            return originals["backward"](tape, loss, grads)
        return events.on_backward(tape, loss, grads, _through(events, lambda: originals["backward"](tape, loss, grads)))

    def zero(tape):
        if _aside(events):
            return originals["zero"](tape)
        return events.on_zero(tape, _through(events, lambda: originals["zero"](tape)))

    return {"__enter__": __enter__, "__exit__": __exit__, "backward": backward, "zero": zero}


def _watched(events, original):
    positions, defaults = _launch_signature()

    def launch(*args, **kwargs):
        if _aside(events) or kwargs.get("adjoint"):  # gradcheck's own launches, and backward's: never the program's
            return original(*args, **kwargs)
        if events.wants_launches:
            call = LaunchCall(args, kwargs, positions, defaults, sys._getframe(1))
            result = events.on_launch(call, _through(events, lambda: original(*args, **kwargs)))
        else:
            result = original(*args, **kwargs)
        tape = active_tape()
        if tape is not None:
            _recorded_from(tape, sys._getframe(1))
        return result

    launch.__wrapped__ = original
    return launch


def _replayed(events, capture):
    def capture_launch(*args, **kwargs):
        if _aside(events):
            return capture(*args, **kwargs)
        graph = args[0] if args else kwargs.get("graph")
        return events.on_graph_replay(graph, _through(events, lambda: capture(*args, **kwargs)))

    return capture_launch


def _captured(events, capture_end):
    """``wp.capture_end`` (ScopedCapture calls it): the graph a capture made, told to the observer."""

    def end(*args, **kwargs):
        graph = capture_end(*args, **kwargs)
        if not _aside(events):
            events.on_capture_end(graph)
        return graph

    return end


def _capture_started(events, capture_begin):
    """``wp.capture_begin`` (ScopedCapture calls it): a recording made in a capture is told to the observer even
    between audited windows (its graph's replays are backwards to audit)."""

    def begin(*args, **kwargs):
        result = capture_begin(*args, **kwargs)
        if not _aside(events):
            events.on_capture_begin()
        return result

    return begin


def _copied(events, copy):
    """``wp.copy`` as the program calls it (Warp's own helpers call the internal one: not seen, not needed)."""

    def watched_copy(*args, **kwargs):
        if _aside(events):
            return copy(*args, **kwargs)
        dest = args[0] if args else kwargs.get("dest")
        src = args[1] if len(args) > 1 else kwargs.get("src")
        events.on_copy(dest, src, sys._getframe(1))  # told before: the copy itself is called from this frame
        return copy(*args, **kwargs)

    watched_copy.__wrapped__ = copy
    # Warp names the program's line in its verify_autograd_array_access warning by walking up to the first frame
    # outside its own package (warp._src.context._copy_caller_location): this wrapper's frame must count as Warp's,
    # or the warning would name gradcheck's file instead of the program's line (as it does not under python)
    import os

    home = os.path.dirname(getattr(sys.modules.get(getattr(copy, "__module__", "")), "__file__", "") or "")
    if home:
        watched_copy.__code__ = _renamed(watched_copy.__code__, os.path.join(home, COPY_HOOK_FILE))
    return watched_copy


def _renamed(code, filename: str):
    """``code`` and any code it contains with ``filename`` as their file."""
    consts = tuple(_renamed(c, filename) if hasattr(c, "co_filename") else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


COPY_HOOK_FILE = "_gradcheck_copy_hook.py"  # the file name the copy hook's frame shows (see _copied)


def _read(events, numpy):
    def host_numpy(array, *args, **kwargs):
        if not _aside(events):
            events.on_host_read(array)
        return numpy(array, *args, **kwargs)

    return host_numpy


def _recorded_from(tape, frame) -> None:
    """Warp records the frame that called ``launch`` as the launch's caller (``metadata["caller"]``): with this
    module's wrapper in between, that frame is the wrapper's. Put back the program's own, as under plain Python."""
    launches = getattr(tape, "launches", None)
    if not launches or launches[-1].__class__ is not list or len(launches[-1]) <= LAUNCH_METADATA:
        return
    metadata = launches[-1][LAUNCH_METADATA]
    caller = metadata.get("caller") if isinstance(metadata, dict) else None
    if isinstance(caller, dict) and caller.get("file") == __file__:
        metadata["caller"] = {"file": frame.f_code.co_filename, "lineno": frame.f_lineno, "func": frame.f_code.co_name}


class PassingEvents:
    """The events ``observed`` drives, each letting the call through untouched: the base of an observer that watches
    only some of them (``intercepted_launches``; a test's)."""

    busy = False
    wants_launches = True

    def on_launch(self, call, run):
        return run()

    def on_tape_enter(self, tape):
        pass

    def on_tape_exit(self, tape):
        pass

    def on_backward(self, tape, loss, grads, run):
        return run()

    def on_zero(self, tape, run):
        return run()

    def on_graph_replay(self, graph, run):
        return run()

    def on_capture_end(self, graph):
        pass

    def on_host_read(self, array):
        pass


@contextlib.contextmanager
def intercepted_launches(before):
    """Call ``before(kernel, dim, inputs, outputs, options)`` ahead of every launch Warp will record on the tape,
    while inside (the blame probe's recorder). Warp records a launch on the tape only after it ran, so this is the
    one place the values a launch is about to read can be seen."""

    class _Before(PassingEvents):
        def on_launch(self, call, run):
            if not call.adjoint and call.get("record_tape", True) and not call.get("record_cmd", False):
                before(call.kernel, call.get("dim"), call.inputs, call.outputs, call.options())
            return run()

    with observed(_Before()):
        yield


# -- nesting: an audit() inside another, or inside a program under exec -------------------------------------------
# Each installation hooks over the one before it, so a call the program makes passes through every observer, the
# innermost first. What an inner observer does for itself (its statistics, its replays) reaches the outer ones'
# hooks too: there it is gradcheck's work, never the program's, so an outer observer stands aside while an inner one
# is busy. But the program's own call, handed on by the inner observer (the ``run`` of its hook, called while it is
# busy), is the program's to every observer: ``_through`` marks it so.
_INSTALLED: list = []  # the observed events, outermost first
_HANDING_ON: dict[int, int] = {}  # id(events) → depth of program calls it is handing on to the observers outside


def _aside(events) -> bool:
    """``events``' hooks let this call through untouched: its own work, or an inner observer's own work."""
    if events.busy:
        return True
    if len(_INSTALLED) < 2 or _INSTALLED[-1] is events:
        return False
    inner = _INSTALLED[next(i for i, e in enumerate(_INSTALLED) if e is events) + 1 :]
    return any(e.busy and not _HANDING_ON.get(id(e)) for e in inner)


def _through(events, run):
    """``run`` (the program's call, which ``events`` hands on) as the program's call to the observers outside; ``run``
    itself while ``events`` is the only one installed (nobody outside asks, and it is on every backward)."""
    if len(_INSTALLED) < 2:
        return run

    def handed_on():
        key = id(events)
        _HANDING_ON[key] = _HANDING_ON.get(key, 0) + 1
        try:
            return run()
        finally:
            _HANDING_ON[key] -= 1

    return handed_on
