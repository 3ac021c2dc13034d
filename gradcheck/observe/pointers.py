"""Struct adjoint pointers, judged before each backward: the structs the tape uses and, when they matter, the
program's own (gradcheck.measure.struct_audit does the judging; this decides what to look at)."""

from __future__ import annotations


class PointerWatch:
    def __init__(self, names, ledger) -> None:
        self.names, self.ledger = names, ledger
        self._watch_held: bool | None = None  # decided on the first backward: audit the structs the program holds?

    @property
    def watching(self) -> bool:
        """The program holds structs whose pointers matter (decided on the first backward)."""
        return bool(self._watch_held)

    def audit(self, struct_roots: list, first: bool) -> list:
        """Stale and dangling pointers in the structs the tape uses and, when they matter, the program's own."""
        from gradcheck.measure.struct_audit import StructAuditor, gradient_relevant, is_struct_array

        if not struct_roots and not first and not self._watch_held:
            return []
        names = self.names.names
        held = [(path, obj, False) for path, obj in names.structs.values()]
        held += [(names.name(a), a, False) for a in names.arrays if is_struct_array(a)]
        if first:
            self._watch_held = bool(struct_roots) or any(gradient_relevant(obj) for _, obj, _ in held)
        roots = [(self._struct_name(v), v, True) for v in struct_roots] + held
        return StructAuditor(names, self.ledger).audit(roots)

    def _struct_name(self, value) -> str:
        found = self.names.names.structs.get(id(value))
        return found[0] if found is not None else self.names.label(value)

    def clean(self, tape, arguments, guard) -> bool:
        """No struct ``tape`` passes (``arguments``: the observer's TapeArguments) has a stale or dangling adjoint
        pointer now: asked before a backward the cadence skips (one found makes it an audited one)."""
        if not (arguments.struct_roots or self.watching):
            return True
        found = []
        with guard("struct pointers"):
            arguments.update(tape)
            found = self.audit(arguments.struct_roots, first=False)
        return not found

    @staticmethod
    def dangling(it, backward: int, stop: bool) -> str | None:
        """What backward number ``backward`` must not do, from ``it.observations``: None when no struct the tape
        uses points at freed memory; else why the program is stopped (``stop``) or the backward skipped."""
        dangling = [o for o in it.observations if o.check == "dangling-adjoint" and o.in_tape]
        if not dangling:
            return None
        more = f" and {len(dangling) - 1} more" if len(dangling) > 1 else ""
        it.skipped = f"dangling adjoint pointer at {dangling[0].subject}{more}"
        if stop:
            return (
                f"gradcheck stopped the program before backward #{backward} ({it.site}): {dangling[0].subject} "
                "points at freed memory, backward would write there (gradcheck exec --keep-going skips such "
                "backwards instead)"
            )
        return it.skipped
