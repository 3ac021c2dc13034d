"""Where an unmodified program keeps its state, as objects the naming walk starts from (``gradcheck exec``,
``gradcheck.audit()``): the program's own objects first, then its globals, then the locals of its frames."""

from __future__ import annotations

import sys

from gradcheck.model.sites import program_frames


def stack_roots(own: tuple[str, ...] = ("__main__",)) -> list[dict]:
    """Where the program keeps its state right now, in the order names are taken from: first the program's own
    objects (instances of its own classes) wherever they are, then everything else, long-lived first: the globals
    (runpy makes them sys.modules["__main__"]), then the locals of every frame from the outermost in. So Newton's
    example, a local of ``newton.examples.run``, names ``example.model.spring_rest_length`` rather than the viewer
    that holds the same model, and ``ex.states[0].particle_qd`` wins over ``param``, a local of the function
    running now."""
    import inspect

    main = sys.modules.get("__main__")
    groups = [dict(getattr(main, "__dict__", {}) or {})]
    frames = list(program_frames(inspect.currentframe()))
    groups += [dict(f.f_locals) for f in reversed(frames)]
    del frames
    seen: set[int] = set()
    mine: dict = {}
    for group in groups:
        for key, value in group.items():
            if type(value).__module__.startswith(own) and id(value) not in seen:
                seen.add(id(value))
                mine.setdefault(key, value)
    ordered = [mine]
    for group in groups:
        rest = {k: v for k, v in group.items() if id(v) not in seen}
        seen |= {id(v) for v in rest.values()}
        if rest:
            ordered.append(rest)
    return ordered


class _Program:
    """The program's globals as one object to walk, so names read ``example.states[0]``, not ``['example']``."""

    __module__ = "program"


def program_object(roots: dict):
    import types

    program = _Program()
    for key, value in roots.items():
        if not key.startswith("__") and not isinstance(value, (types.ModuleType, types.FunctionType, type)):
            setattr(program, key, value)
    return program
