"""Names for the arrays a program holds, as its own code spells them, kept between backwards.

A finding that says ``states[100].joint_qdd.grad`` is actionable; ``array 0x7f3a…`` is not. Walking a program
for names (every attribute, list, dict and struct it holds) is the most expensive thing the observer does, and a
training loop asks for the same few names on every backward. So a name once given is kept (the history of a
gradient stays under one subject), and the program is walked again only when an array nobody named yet is asked
for *and* Warp allocated memory since the last walk: per-backward work proportional to what changed.
"""

from __future__ import annotations

from collections.abc import Callable

from gradcheck.tape.naming import ArrayNames, walk

MEMO = 65536  # names remembered past the walk that found them (a weak reference and a string each)


class Names:
    """``roots()`` returns the object to walk (a scenario), or a list of them, long-lived first (a program's
    globals, then the locals of its frames from the outermost in): a name from an earlier one wins."""

    def __init__(self, roots: Callable[[], object], ledger=None):
        self._roots = roots
        self._ledger = ledger
        self._names: ArrayNames | None = None
        self._walked_at: int | None = None
        self._given: list[tuple[object, str]] = []  # names given up front (declared params), re-added after a walk
        self.tape = None  # the tape whose launches give fallback labels (``kernel.argument``)
        self._event = 0
        self._walked_event = -1
        self._retry: dict[int, tuple[int, int]] = {}  # id → (event from which a miss may walk again, backoff)
        self._memo: dict[int, tuple[object, str]] = {}  # id → (weak reference, name): every name given so far
        self.resolvers: list = []  # array -> name or None, asked before a walk (a wp.from_torch wrapper: its tensor's)

    def new_event(self) -> None:
        """A backward started: a name missed before may be looked for again (at most one walk an event)."""
        self._event += 1

    @property
    def names(self) -> ArrayNames:
        """Every name known so far (walked on first use)."""
        if self._names is None:
            self._walk()
        return self._names

    def give(self, array, name: str) -> None:
        """A name the driver knows better than a walk (a declared param's key)."""
        self._given.append((array, name))
        if self._names is not None:
            self._add(self._names, array, name)

    def name(self, array) -> str | None:
        """Where the program keeps ``array``, or None. A miss walks the program again only if Warp allocated since
        the last walk, at most once an event, and for the same array after 1, 2, 4, … events: an array the program
        does not hold anywhere costs a bounded number of walks, however long it trains."""
        remembered = self._remembered(array)
        if remembered is not None:
            return remembered
        found = self._resolved(array)
        if found is not None:
            return found
        found = self.names.name(array)
        if found is not None:
            return self._remember(array, found)
        if not self._stale() or self._walked_event == self._event:
            return found
        retry_at, gap = self._retry.get(id(array), (0, 1))
        if self._event < retry_at:
            return None
        self._walk()
        found = self._names.name(array)
        if found is None:
            self._retry[id(array)] = (self._event + gap, gap * 2)
            return None
        return self._remember(array, found)

    def _resolved(self, array) -> str | None:
        for resolve in self.resolvers:
            found = resolve(array)
            if found is not None:
                return self._remember(array, found)
        return None

    def _remembered(self, array) -> str | None:
        entry = self._memo.get(id(array))
        if entry is None:
            return None
        if entry[0]() is array:
            return entry[1]
        del self._memo[id(array)]  # another array at a freed one's id
        return None

    def _remember(self, array, name: str) -> str:
        """A name once given stays the array's for the rest of the run (its history keeps one subject), also
        after the frame that held it returned (a unittest method's locals): weakly held, so it never keeps the
        program's memory alive."""
        import weakref

        if len(self._memo) >= MEMO:
            self._memo = {k: v for k, v in self._memo.items() if v[0]() is not None}
            if len(self._memo) >= MEMO:
                self._memo.pop(next(iter(self._memo)))
        try:
            self._memo[id(array)] = (weakref.ref(array), name)
        except TypeError:  # an object without weak references: not remembered beyond the walk
            pass
        return name

    def label(self, array, suffix: str = "") -> str:
        """A name for a report: the program's path, else ``kernel.argument`` of the first launch that used it."""
        found = self.name(array)
        if found is not None:
            return found + suffix
        from gradcheck.warp_compat import first_use_label, tape_launches

        if self.tape is not None:
            used = first_use_label(tape_launches(self.tape), array, suffix)
            if used is not None:
                return used
        return f"array#{id(array) & 0xFFFFFF:06x}{suffix}"

    def known(self, array) -> str | None:
        """A name already given to ``array`` (remembered, or in the last walk), without walking again."""
        if array is None:
            return None
        return self._remembered(array) or self._resolved(array) or self.names.name(array)

    def gradient_subject(self, owner) -> str:
        """The subject of ``owner``'s gradient: ``x.grad`` (or the gradient buffer's own name when it has one)."""
        return self.known(getattr(owner, "grad", None)) or self.label(owner, ".grad")

    def _stale(self) -> bool:
        return self._ledger is None or self._walked_at != self._ledger.allocations

    def _walk(self) -> None:
        roots = self._roots()
        fresh = walk(*roots) if isinstance(roots, (list, tuple)) else walk(roots)
        for array, name in self._given:
            self._add(fresh, array, name)
        if self._names is not None:  # a name once given stays, while the program still holds the array
            for array in self._names.arrays:
                if id(array) in fresh.by_id:
                    fresh.by_id[id(array)] = self._names.by_id[id(array)]
            # arrays the program no longer holds are dropped: keeping them named would keep them alive

        self._names = fresh
        self._walked_at = self._ledger.allocations if self._ledger is not None else None
        self._walked_event = self._event

    @staticmethod
    def _add(names: ArrayNames, array, name: str) -> None:
        if names.name(array) is None:
            names.add(array, name)
            grad = getattr(array, "grad", None)
            if grad is not None and names.name(grad) is None:
                names.add(grad, name + ".grad")
