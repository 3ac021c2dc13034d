"""Struct mirrors and array-of-structs records, checked against the live arrays before backward.

A ``wp.struct`` instance keeps a ctypes mirror of every array field (data pointer, grad pointer,
shape, strides, flags), copied by value when the field is assigned and never refreshed. Kernels
receive the mirror. So ``arr.requires_grad = False``, ``arr.grad = new`` or ``requires_grad = True``
after assignment leave the mirror pointing at a buffer the user no longer sees (stale), and an
array of structs, which copies descriptors and keeps no reference at all, can point at freed
memory (dangling). Nested structs are copied on assignment, so editing the inner instance later
does not reach the outer one.

This module compares every mirror and record with the live array, recursively, and judges each
pointer with the allocation ledger and the arrays the walk for names reached (gradcheck.tape.naming).
"""

from __future__ import annotations

import ctypes
import gc
from dataclasses import dataclass, field

from gradcheck.measure.allocations import AllocationLedger
from gradcheck.measure.stats import gradient_stats
from gradcheck.model.trace import PointerIssue
from gradcheck.tape.naming import ArrayNames
from gradcheck.warp_compat import (
    array_class,
    is_array_var,
    is_float_array,
    is_struct_type,
    same_struct_type,
    struct_grad_keepalive,
    struct_keepalive_name,
    struct_mirror,
    struct_records,
    struct_vars,
)


@dataclass
class Observation:
    """A PointerIssue in the making: ``owner_array`` is read after the zero step for orphan evidence."""

    check: str
    kind: str
    subject: str
    mirror: int
    live: int
    in_tape: bool
    owner: str | None = None
    source: str | None = None
    detail: str = ""
    owner_array: object = field(default=None, repr=False)
    container: str = "struct"  # "struct" (an instance's ctypes mirror) | "array of structs" (raw records)


@dataclass
class PointerStatus:
    state: str  # "live" | "freed" | "unknown"
    owner: str | None = None
    array: object = None


class StructAuditor:
    def __init__(self, names: ArrayNames, ledger: AllocationLedger | None):
        self.names = names
        self.ledger = ledger
        self._gc_arrays: list | None = None
        self._grad_ptrs: set[int] | None = None
        self._seen: set[int] = set()
        self._by_array: dict[int, list[int]] | None = None
        self.issues: list[Observation] = []
        self._container = "struct"

    # -- entry points -----------------------------------------------------------------------------
    def audit(self, roots) -> list[Observation]:
        """``roots``: (path, struct instance or array of structs, in_tape); tape roots first."""
        for path, obj, in_tape in sorted(roots, key=lambda r: not r[2]):
            if isinstance(obj, array_class()):
                if obj.ptr and id(obj) not in self._seen:
                    self._seen.add(id(obj))
                    self._records(obj, path, in_tape)
            else:
                self._instance(obj, struct_mirror(obj), path, in_tape)
        return self.issues

    # -- struct instances -------------------------------------------------------------------------
    def _instance(self, instance, mirror, path: str, in_tape: bool) -> None:
        address = ctypes.addressof(mirror)
        key = address ^ (id(type(mirror)) << 1)
        if key in self._seen:
            return
        self._seen.add(key)
        for name, var in struct_vars(instance):
            if is_array_var(var):
                self._field(instance, name, getattr(mirror, name), f"{path}.{name}", in_tape)
            elif is_struct_type(var.type):
                child = getattr(instance, name)
                child_mirror = getattr(mirror, name)
                self._nested_copy(child, child_mirror, f"{path}.{name}", in_tape)
                self._instance(child, child_mirror, f"{path}.{name}", in_tape)

    def _field(self, instance, name: str, desc, path: str, in_tape: bool) -> None:
        live = getattr(instance, name, None)
        mdata, mgrad = int(desc.data or 0), int(desc.grad or 0)
        ldata = int(live.ptr or 0) if live is not None else 0
        if mdata != ldata:
            self._stale_data(path, mdata, ldata, in_tape)
        if live is None:
            return
        lgrad = int(live.grad.ptr or 0) if live.grad is not None else 0
        if mgrad == lgrad:
            return
        subject = f"{path}.grad"
        if mgrad == 0:
            self._add(
                "stale-adjoint",
                "null-grad",
                subject,
                mgrad,
                lgrad,
                in_tape,
                detail="the mirror's grad pointer is null although the array now has a gradient buffer "
                "(requires_grad turned on after assignment): backward drops this gradient",
            )
            return
        keepalive = struct_grad_keepalive(instance, name)  # Warp >= 1.7.2 keeps the old grad alive
        if keepalive is not None and _ptr(keepalive) == mgrad:
            owner = struct_keepalive_name(path.rsplit(".", 1)[0], name)
            self._stale_grad(subject, mgrad, lgrad, in_tape, owner, keepalive)
        else:
            self._misdirected_grad(subject, mgrad, lgrad, in_tape)

    def _misdirected_grad(self, subject, mgrad, lgrad, in_tape, written_at: int | None = None) -> None:
        """A grad pointer that differs from the live array's: stale if it is some gradient buffer, else dangling.

        ``written_at``: ledger sequence number of the allocation holding the pointer (an array of
        structs); memory allocated after it cannot be what the pointer was written for.
        """
        status = self.status(mgrad)
        if status.state != "live":
            self._dangling(subject, mgrad, lgrad, in_tape, status)
            return
        owner_array, owner = status.array, status.owner
        block = self.ledger.block_at(mgrad) if self.ledger is not None else None
        reused = written_at is not None and block is not None and block.seq > written_at
        if reused or (owner_array is not None and not self._is_gradient_buffer(owner_array, owner)):
            self._add(
                "dangling-adjoint",
                "reused",
                subject,
                mgrad,
                lgrad,
                in_tape,
                owner=owner,
                detail=f"the gradient buffer this pointer referred to was freed and its memory now belongs to "
                f"{owner or 'a newer allocation'}: backward would write the gradient into it",
                owner_array=owner_array,
            )
            return
        self._stale_grad(subject, mgrad, lgrad, in_tape, owner, owner_array)

    def _stale_grad(self, subject, mgrad, lgrad, in_tape, owner, owner_array) -> None:
        kind = "orphan-grad" if lgrad == 0 else "replaced-grad"
        detail = (
            "requires_grad was turned off after assignment: backward writes into the old gradient buffer, "
            "which nothing zeroes"
            if kind == "orphan-grad"
            else "the array's .grad was replaced after assignment: backward writes into the old buffer and "
            "the new one stays zero"
        )
        self._add(
            "stale-adjoint", kind, subject, mgrad, lgrad, in_tape, owner=owner, detail=detail, owner_array=owner_array
        )

    def _stale_data(self, path, mdata, ldata, in_tape) -> None:
        if mdata == 0:
            return
        status = self.status(mdata)
        if status.state != "live":
            self._dangling(path, mdata, ldata, in_tape, status)
        else:
            self._add(
                "stale-adjoint",
                "stale-data",
                path,
                mdata,
                ldata,
                in_tape,
                owner=status.owner,
                detail="the mirror uses a different array than the field now holds",
            )

    def _nested_copy(self, child, child_mirror, path: str, in_tape: bool) -> None:
        """``outer.inner = inner`` copies; ``inner.f = new`` later leaves ``outer.inner.f`` on the old array.

        Candidates for the instance a copy came from are the scenario's struct instances of the same
        type that share at least one array with it (looked up by data pointer, not by pairwise scan).
        """
        address = ctypes.addressof(child_mirror)
        array_fields = [n for n, v in struct_vars(child) if is_array_var(v)]
        mine_by_field = {n: int(getattr(child_mirror, n).data or 0) for n in array_fields}
        candidates = {}
        for ptr in mine_by_field.values():
            for key in self._instances_by_array().get(ptr, ()):
                candidates[key] = self.names.structs[key]
        for source_path, source in candidates.values():
            if (
                source is child
                or not same_struct_type(source, child)
                or ctypes.addressof(struct_mirror(source)) == address
            ):
                continue
            pairs = [(n, mine_by_field[n], _ptr(getattr(source, n, None))) for n in array_fields]
            if not any(mine and mine == theirs for _, mine, theirs in pairs):
                continue
            for n, mine, theirs in pairs:
                if not theirs or mine == theirs:
                    continue
                old = getattr(child, n, None)
                known = self.names.name(old) if old is not None else None
                if known is not None and not known.startswith(path):
                    continue  # the user still holds the old array elsewhere: a deliberate difference
                self._add(
                    "stale-adjoint",
                    "nested-copy",
                    f"{path}.{n}",
                    mine,
                    theirs,
                    in_tape,
                    source=source_path,
                    detail=f"{path} is a copy of {source_path} taken when it was assigned; {source_path}.{n} was "
                    f"re-assigned afterwards, so the kernel still reads (and differentiates) the old array",
                )

    def _instances_by_array(self) -> dict[int, list[int]]:
        """data pointer → ids of the scenario's struct instances holding that array in a field."""
        if self._by_array is None:
            index: dict[int, list[int]] = {}
            for key, (_path, instance) in self.names.structs.items():
                for name, var in struct_vars(instance):
                    if is_array_var(var):
                        ptr = _ptr(getattr(instance, name, None))
                        if ptr:
                            index.setdefault(ptr, []).append(key)
            self._by_array = index
        return self._by_array

    # -- arrays of structs ------------------------------------------------------------------------
    def _records(self, array, path: str, in_tape: bool) -> None:
        block = self.ledger.block_at(array.ptr) if self.ledger is not None else None
        written_at = block.seq if block is not None else None
        self._container = "array of structs"
        try:
            for index, record in struct_records(array):
                self._record(record, f"{path}[{index}]", in_tape, written_at)
        finally:
            self._container = "struct"

    def _record(self, record: dict, path: str, in_tape: bool, written_at: int | None) -> None:
        for name, (var, value) in record.items():
            if isinstance(value, dict):
                self._record(value, f"{path}.{name}", in_tape, written_at)
                continue
            if not is_array_var(var):
                continue
            field_path = f"{path}.{name}"
            owner = self.names.at(value.data) if value.data else None
            if value.data:
                status = self.status(value.data)
                if status.state != "live":
                    self._dangling(field_path, value.data, 0, in_tape, status)
                    continue
            if not value.grad:
                continue
            live_grad = _ptr(owner[1].grad) if owner is not None else None
            if live_grad == value.grad:
                continue
            if owner is None:  # no live array to compare with: the pointer itself must be sound
                status = self.status(value.grad)
                if status.state != "live":
                    self._dangling(f"{field_path}.grad", value.grad, 0, in_tape, status)
                elif status.array is not None and not self._is_gradient_buffer(status.array, status.owner):
                    self._add(
                        "dangling-adjoint",
                        "reused",
                        f"{field_path}.grad",
                        value.grad,
                        0,
                        in_tape,
                        owner=status.owner,
                        detail=f"the record's gradient pointer lies in memory that belongs to {status.owner}",
                        owner_array=status.array,
                    )
                continue
            self._misdirected_grad(f"{field_path}.grad", value.grad, live_grad or 0, in_tape, written_at)

    # -- pointer judgement ------------------------------------------------------------------------
    def status(self, ptr: int) -> PointerStatus:
        known = self.names.covering(ptr)
        if known is not None:
            return PointerStatus("live", known[0], known[1])
        if self.ledger is not None:
            if self.ledger.block_at(ptr) is not None:
                found = self._gc_owner(ptr)
                return PointerStatus("live", *(found or (None, None)))
            if self.ledger.freed_at(ptr) is not None:
                return PointerStatus("freed")
        found = self._gc_owner(ptr)
        if found is not None:
            return PointerStatus("live", *found)
        return PointerStatus("unknown")

    def _gc_owner(self, ptr: int):
        """A live wp.array anywhere in the process covering ``ptr`` (one heap scan per audit, only when needed)."""
        if self._gc_arrays is None:
            array_type = array_class()
            self._gc_arrays = [o for o in _all_objects() if isinstance(o, array_type) and getattr(o, "ptr", None)]
        for array in self._gc_arrays:
            if array.ptr <= ptr < array.ptr + max(int(getattr(array, "capacity", 0) or 0), 1):
                label = f"an unnamed {tuple(array.shape)} {getattr(array.dtype, '__name__', array.dtype)} array"
                return self.names.name(array) or label, array
        return None

    def _is_gradient_buffer(self, array, name: str | None) -> bool:
        if self._grad_ptrs is None:
            self._grad_ptrs = {int(a.grad.ptr) for a in self.names.arrays if getattr(a, "grad", None) is not None}
        if int(array.ptr or 0) in self._grad_ptrs:
            return True
        leaf = (name or "").rsplit(".", 1)[-1]
        return leaf == "grad" or leaf.endswith("_grad")  # a struct's keepalive of an old gradient

    def _dangling(self, subject, mirror, live, in_tape, status: PointerStatus) -> None:
        if status.state == "freed":
            detail = "the memory was freed during this run (the allocation ledger saw it go)"
            kind = "freed"
        else:
            detail = (
                "no live Warp allocation covers this address (medium confidence: an allocation made before "
                "gradcheck started watching could still own it)"
            )
            kind = "unknown"
        self._add("dangling-adjoint", kind, subject, mirror, live, in_tape, detail=detail)

    def _add(self, check, kind, subject, mirror, live, in_tape, owner=None, source=None, detail="", owner_array=None):
        self.issues.append(
            Observation(
                check,
                kind,
                subject,
                int(mirror),
                int(live),
                in_tape,
                owner,
                source,
                detail,
                owner_array,
                self._container,
            )
        )


def pointer_issue(observation: Observation) -> PointerIssue:
    """Freeze an observation, with the norm of the buffer backward really wrote (after the zero step)."""
    norm = None
    owner = observation.owner_array
    # the owner can be any array the allocator handed the freed memory to (an int32 index array, say)
    if owner is not None and observation.kind in ("orphan-grad", "replaced-grad", "reused") and is_float_array(owner):
        norm = gradient_stats([owner])[0].norm
    return PointerIssue(
        check=observation.check,
        kind=observation.kind,
        subject=observation.subject,
        mirror=observation.mirror,
        live=observation.live,
        in_tape=observation.in_tape,
        owner=observation.owner,
        source=observation.source,
        orphan_norm=norm,
        detail=observation.detail,
        container=observation.container,
    )


def is_struct_array(value) -> bool:
    return isinstance(value, array_class()) and is_struct_type(value.dtype)


def gradient_relevant(obj) -> bool:
    """Does a struct instance or array of structs carry any gradient pointer (mirror or live)?"""
    from gradcheck.warp_compat import is_struct_instance, struct_fields

    if is_struct_array(obj):
        return any(_record_has_grad(record) for _, record in struct_records(obj))
    mirror = struct_mirror(obj)
    for name, value, var in struct_fields(obj):
        if is_array_var(var):
            if int(getattr(mirror, name).grad or 0) or (value is not None and value.grad is not None):
                return True
        elif is_struct_instance(value) and gradient_relevant(value):
            return True
    return False


def _record_has_grad(record: dict) -> bool:
    for _var, value in record.values():
        if isinstance(value, dict):
            if _record_has_grad(value):
                return True
        elif getattr(value, "grad", 0):
            return True
    return False


def _all_objects() -> list:
    """Every GC-tracked object, frozen ones included: the runner freezes the heap after setup
    (gc.freeze), and gc.get_objects() does not list the permanent generation."""
    if not gc.get_freeze_count():
        return gc.get_objects()
    gc.unfreeze()
    try:
        return gc.get_objects()
    finally:
        gc.freeze()


def _ptr(array) -> int:
    return int(array.ptr or 0) if array is not None else 0
