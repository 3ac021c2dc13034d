"""The observer owns its parts through one interface (observe.parts.ObserverPart), and nobody configures it from
outside: a part sees a PartContext and callbacks, never the observer; a driver hands an ObserverConfig to the
constructor and assigns none of the observer's attributes afterwards."""

from __future__ import annotations

import inspect
import re

from conftest import ROOT

from gradcheck.observe import Observer
from gradcheck.observe.config import observer_config
from gradcheck.observe.launch_tests import LaunchTests
from gradcheck.observe.parts import ObserverPart

EVENTS = ("on_tape_enter", "on_backward_begin", "on_backward_end", "on_window_leave", "on_finish")


def _observer() -> Observer:
    from gradcheck.observe.blame_watch import BlameWatch

    return Observer(roots=lambda: {}, config=observer_config(), blame=LaunchTests(BlameWatch(1), None))


def test_every_part_is_an_observer_part_with_the_protocols_events():
    observer = _observer()
    names = {type(part).__name__ for part in observer.parts}
    assert names == {"AuditWindow", "ZeroSteps", "Recordings", "GraphReplays", "BlameHooks", "Causes"}
    for part in (*observer.parts, observer.causes.rows):
        assert isinstance(part, ObserverPart), type(part).__name__
        for event in EVENTS:
            wanted = list(inspect.signature(getattr(ObserverPart, event)).parameters)
            assert list(inspect.signature(getattr(type(part), event)).parameters) == wanted, (part, event)


def test_an_object_without_the_events_is_no_part():
    class Half:
        def on_tape_enter(self, tape, backwards):
            pass

    assert not isinstance(Half(), ObserverPart)


def test_no_part_holds_the_observer():
    observer = _observer()
    for part in (*observer.parts, observer.causes.rows):
        held = [name for name, value in vars(part).items() if value is observer]
        assert not held, f"{type(part).__name__} holds the observer as {held}"


def test_nothing_outside_the_observer_assigns_its_attributes():
    assignment = re.compile(r"\b(?:observer|obs|self\.observer|audit\.observer)\.\w+\s*=[^=]")
    found = []
    for folder in ("gradcheck/engine", "gradcheck/pytorch", "gradcheck/cli"):
        for path in sorted((ROOT / folder).glob("*.py")):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if assignment.search(line) and not line.lstrip().startswith("#"):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    for path in (ROOT / "gradcheck" / "auditing.py", ROOT / "gradcheck" / "api.py"):
        found += [f"{path.name}: {line}" for line in path.read_text().splitlines() if assignment.search(line)]
    assert not found, "configure the observer through observe.config, not by assignment:\n" + "\n".join(found)


def test_the_window_leave_reaches_the_parts_that_watched():
    """Leaving an audited window ends what the parts watched: the Jacobian-row window and the recordings' watches."""
    observer = _observer()
    observer.causes.rows.rows.after_backward(1, None, None, None, {"x": object()}, {})
    assert observer.causes.rows.rows.watching
    observer.window.leave()
    assert observer.window.light and not observer.causes.rows.rows.watching
    observer.window.arm()
    assert not observer.window.light
