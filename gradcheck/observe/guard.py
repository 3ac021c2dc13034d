"""The observer's own work, kept out of the program's way: while it runs, every hook lets Warp through untouched
(``busy``), and whatever it raises becomes an InternalError for the report (an ``internal-error`` finding), never
the program's exception. A DanglingAdjointStop (meant for the program) and the user's Ctrl-C go through."""

from __future__ import annotations

import contextlib

from gradcheck.model.trace import InternalError

MAX_INTERNAL_ERRORS = 20


class DanglingAdjointStop(Exception):
    """Raised into the program instead of a backward that would write through freed memory (a sanitizer stopping
    at the first invalid write); ``gradcheck exec --keep-going`` skips such backwards instead."""


class Guarded:
    ROLE = "observer"  # internal errors read "observer: <component>" (the torch side's: "torch observer: ...")

    def __init__(self) -> None:
        self._depth = 0
        self.internal_errors: list[InternalError] = []

    @property
    def busy(self) -> bool:
        return self._depth > 0

    @contextlib.contextmanager
    def ignoring(self):
        """Work that is not the program's (the observer's own, a driver's restore or clip): hooks stand aside."""
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1

    @contextlib.contextmanager
    def _guard(self, component: str):
        """The observer's own work: hooks bypassed meanwhile; a failure becomes an InternalError, never the
        program's (a DanglingAdjointStop and the user's Ctrl-C go through). Warp's own chatter (loading gradcheck's
        kernels) is kept off the program's stdout meanwhile."""
        from gradcheck.warp_compat.runtime import quiet

        self._depth += 1
        try:
            with quiet():
                yield
        except DanglingAdjointStop:
            raise
        except Exception as exc:  # noqa: BLE001 - gradcheck's own failure must not end or change the program
            self._internal(f"{self.ROLE}: {component}", exc)
        finally:
            self._depth -= 1

    def _internal(self, component: str, exc: BaseException) -> None:
        found = InternalError.of(component, exc)
        if len(self.internal_errors) < MAX_INTERNAL_ERRORS and all(
            (e.component, e.error) != (found.component, found.error) for e in self.internal_errors
        ):
            self.internal_errors.append(found)
