"""The observer's own work, kept out of the program's way: while it runs, every hook lets Warp through untouched
(``busy``), and whatever it raises becomes an InternalError for the report (an ``internal-error`` finding), never
the program's exception. A DanglingAdjointStop (meant for the program) and the user's Ctrl-C go through.

One ``Guard`` per observer, shared by its parts (observe.parts): the hooks stand aside while any part works, and
every part's failure lands in the one list the Trace reports."""

from __future__ import annotations

from gradcheck.model.trace import InternalError

MAX_INTERNAL_ERRORS = 20


class DanglingAdjointStop(Exception):
    """Raised into the program instead of a backward that would write through freed memory (a sanitizer stopping
    at the first invalid write); ``gradcheck exec --keep-going`` skips such backwards instead."""


class Guard:
    """``with guard("component"):`` the observer's own work; ``with guard.ignoring():`` work that is not the
    program's and must not fail into the report either way (a backward's own launches, a driver's restore)."""

    def __init__(self, role: str = "observer") -> None:
        self.role = role  # internal errors read "observer: <component>" (the torch side's: "torch observer: ...")
        self.depth = 0
        self.quiet = False  # a scope has silenced Warp and warnings (the outermost one restores them)
        self.internal_errors: list[InternalError] = []

    @property
    def busy(self) -> bool:
        return self.depth > 0

    def ignoring(self) -> _Ignoring:
        """Work that is not the program's (the observer's own, a driver's restore or clip): hooks stand aside."""
        return _Ignoring(self)

    def __call__(self, component: str, quiet: bool = True) -> _Scope:
        """The observer's own work: hooks bypassed meanwhile; a failure becomes an InternalError, never the
        program's (a DanglingAdjointStop and the user's Ctrl-C go through). Warp's own chatter (loading gradcheck's
        kernels) and Python's warnings are kept off the program's streams meanwhile (warp_compat.runtime.quiet),
        set up once by the outermost scope: an observer enters a few hundred scopes a pass, mostly nested.
        ``quiet=False``: work that loads no Warp module and does no arithmetic (bookkeeping on every backward of a
        long run, where silencing cost more than the work)."""
        return _Scope(self, component, quiet)

    def internal(self, component: str, exc: BaseException) -> None:
        found = InternalError.of(component, exc)
        if len(self.internal_errors) < MAX_INTERNAL_ERRORS and all(
            (e.component, e.error) != (found.component, found.error) for e in self.internal_errors
        ):
            self.internal_errors.append(found)


class _Ignoring:
    """``with guard.ignoring():`` as a class (around every backward of a long run: a generator-based context manager
    cost ~1.5 µs of it)."""

    __slots__ = ("guard",)

    def __init__(self, guard: Guard) -> None:
        self.guard = guard

    def __enter__(self) -> None:
        self.guard.depth += 1

    def __exit__(self, *exc) -> None:
        self.guard.depth -= 1


class _Scope:
    """One ``with guard(component):`` (a class, not a generator: it is entered ~450 times a Newton pass)."""

    __slots__ = ("guard", "component", "quiet", "wanted")

    def __init__(self, guard: Guard, component: str, wanted: bool = True) -> None:
        self.guard, self.component, self.quiet, self.wanted = guard, component, None, wanted

    def __enter__(self) -> None:
        guard = self.guard
        guard.depth += 1
        if self.wanted and not guard.quiet:
            self.quiet = _silence()
            self.quiet.__enter__()
            guard.quiet = True

    def __exit__(self, kind, exc, traceback) -> bool:
        guard = self.guard
        try:
            if self.quiet is not None:
                guard.quiet = False
                self.quiet.__exit__(None, None, None)
        finally:
            guard.depth -= 1
        if kind is None or issubclass(kind, DanglingAdjointStop) or not issubclass(kind, Exception):
            return False
        guard.internal(f"{guard.role}: {self.component}", exc)  # gradcheck's own failure must not end the program
        return True


def _silence():
    """warp_compat.runtime.quiet(), imported once (an import statement on each outermost scope cost ~0.5 µs)."""
    global _quiet
    if _quiet is None:
        from gradcheck.warp_compat.runtime import quiet

        _quiet = quiet
    return _quiet()


_quiet = None


class Guarded:
    """A Guard as a mixin, for the torch side (gradcheck.pytorch.watch): ``busy``, ``ignoring()``, ``_guard()`` and
    the internal errors on the object itself."""

    ROLE = "observer"

    def __init__(self) -> None:
        self._guard_of = Guard(self.ROLE)

    @property
    def _depth(self) -> int:
        return self._guard_of.depth

    @_depth.setter
    def _depth(self, depth: int) -> None:
        self._guard_of.depth = depth

    @property
    def internal_errors(self) -> list[InternalError]:
        return self._guard_of.internal_errors

    @property
    def busy(self) -> bool:
        return self._guard_of.busy

    def ignoring(self):
        return self._guard_of.ignoring()

    def _guard(self, component: str):
        return self._guard_of(component)

    def _internal(self, component: str, exc: BaseException) -> None:
        self._guard_of.internal(component, exc)
