"""Reads of a gradient between backwards of one computation, when the later backward adds to what was read.

A Jacobian taken row by row runs several backwards on one computation, each seeded on another output (or with
another seed), and reads the gradient after each. Warp's backward adds into a gradient buffer (kernel adjoints
accumulate; only the seeded outputs' gradients are overwritten), so without ``tape.zero()`` (or ``x.grad.zero_()``)
between the rows, row i read after backward i holds rows 0..i. No iteration boundary separates the rows (the params
never move), so the residue of gradcheck.observe.leftovers, judged across boundaries, never sees it.

The evidence, all of it needed:

1. backward j produced the gradient, and the program read it (``array.numpy()``, a copy from it, a launch whose
   code loads it; an update launch is a step, not a read) before the next backward;
2. backward k = j + 1 runs on the same computation (the same tape, not recorded again, or a tape of the same
   launches on the same arrays, the params unmoved) and is seeded differently (another loss or output array, or
   other seed values): several backwards of one seed before one read are deliberate accumulation;
3. when backward k starts, the buffer still holds exactly what backward j left (nonzero: nothing cleared it), and
   backward k changes it (it added to it; a buffer it leaves bit-identical got nothing) and does not seed it;
4. the program reads it again, at the same place (file:line) as the earlier read, before anything clears it: that
   read saw the sum where it took the earlier read's place (a row read in a loop). A read elsewhere is another
   quantity to the program (task 1's gradient logged, then the total it steps on): no verdict.

Whether the reading code takes differences of consecutive reads (``row = g - prev``: the running sum on purpose)
is read off its source (gradcheck.observe.differencing) and recorded for the check to judge.

Cost: nothing across an iteration boundary (a training loop's backward, update, zero); otherwise a few dict
lookups per read and launch after a backward, and one statistics launch over the read gradients when a differently
seeded backward of the same computation starts.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from gradcheck.model.trace import CarriedRead
from gradcheck.observe.parts import BackwardEvent, ObserverPart, PartContext


@dataclass
class _Grad:
    grad: object
    owner: object
    checksum: int | None  # right after the backward
    norm: float


@dataclass
class _Backward:
    """One audited backward and the window after it, until the next backward."""

    index: int
    tape: object
    launches: object  # the tape's launch list (tape.reset() binds a new one) and its length when it ran
    count: int
    loss: object
    grads: object
    measured: dict  # key → array, and key → its gradient's statistics, right after the backward
    stats: dict
    seed: tuple | None = None  # how it was seeded (see _seed); taken before it ran, or at the first read
    reads: dict = field(default_factory=dict)  # grad pointer → (reader, site) of the first read in the window
    _produced: dict | None = None
    _spans: tuple | None = None  # (produced, sorted starts, [(end, _Grad)], overlap): for views (containing)

    @property
    def produced(self) -> dict:
        """grad pointer → _Grad, built at the first read or launch that asks (a backward nothing reads pays none)."""
        if self._produced is None:
            self._produced = _produced(self.measured, self.stats)
        return self._produced

    def containing(self, array) -> _Grad | None:
        """The produced gradient ``array`` is (or views: ``x.grad[1:]``, a row of a 2-d gradient). A Newton rollout
        produces hundreds of gradients and copies between steps every step: a bisection over their extents, built
        once a window, instead of a scan per read."""
        ptr = getattr(array, "ptr", None)
        if not ptr:
            return None
        produced = self.produced
        hit = produced.get(ptr)
        if hit is not None:
            return hit
        if self._spans is None or self._spans[0] is not produced:
            self._spans = (produced, *_spans(produced))
        _, starts, ends, overlap = self._spans
        if overlap:  # gradients sharing memory (views of one buffer): each extent in turn, as declared
            return next((g for g in produced.values() if g.grad.ptr and g.grad.ptr <= ptr < _end(g)), None)
        i = bisect.bisect_right(starts, ptr) - 1
        return ends[i][1] if i >= 0 and ptr < ends[i][0] else None


@dataclass
class _Carry:
    """A read gradient the running backward found still holding the earlier backward's value."""

    grad: _Grad
    earlier: int
    earlier_reader: str
    earlier_site: str | None
    seeds: str
    confirmed: bool = False  # the backward changed the buffer
    read_norm: float = 0.0
    backward: int = 0
    reported: bool = False


class RowReads:
    """``before_backward``/``after_backward`` around each audited backward, ``read`` on host reads and copies,
    ``launch`` on launches outside backward; ``forget`` when backwards go unaudited."""

    def __init__(self, checksums) -> None:
        self._checksums = checksums  # list of arrays → [checksum | None], one device launch
        self._window: _Backward | None = None
        self._carries: dict[int, _Carry] = {}
        self._pending_seed: tuple | None = None  # the running backward's seed, when it was taken before it ran

    def forget(self) -> None:
        self._window, self._carries, self._pending_seed = None, {}, None

    # -- backwards ---------------------------------------------------------------------------------------------
    def before_backward(self, index: int, tape, loss, grads, boundary: bool) -> None:
        """Backward ``index`` is about to run: the gradients read since the last one that it may add to."""
        last, self._window, self._carries, self._pending_seed = self._window, None, {}, None
        if last is None or not last.reads or boundary or last.index != index - 1:
            return  # the common case: no read between two backwards of one iteration
        if not _same_computation(last, tape):
            return
        seed = _seed(loss, grads)
        if last.seed is None or seed == last.seed:
            return  # the same seed again: deliberate accumulation
        self._pending_seed = seed
        seeded = _seeded_gradients(loss, grads)
        read = [last.produced[p] for p in last.reads if p not in seeded and last.produced[p].norm]
        if not read:
            return
        now = self._checksums([g.grad for g in read])
        words = _seed_words(last, loss, grads)
        for g, checksum in zip(read, now):
            if checksum is not None and checksum == g.checksum:  # still exactly what backward `last` left
                reader, site = last.reads[g.grad.ptr]
                self._carries[g.grad.ptr] = _Carry(g, last.index, reader, site, words)

    def after_backward(self, index: int, tape, loss, grads, measured: dict, stats: dict) -> None:
        """``measured`` (key → array) and ``stats`` (key → its gradient's statistics) right after backward ``index``:
        which carried buffers it added to, and the window of reads after it."""
        by_ptr = _produced(measured, stats) if self._carries else None
        for ptr, carry in list(self._carries.items()):
            now = by_ptr.get(ptr)
            if now is None or now.checksum is None or now.checksum == carry.grad.checksum:
                del self._carries[ptr]  # left bit-identical (or not measured): nothing was added
                continue
            carry.confirmed, carry.read_norm, carry.backward = True, now.norm, index
        launches = getattr(tape, "launches", None)
        seed, self._pending_seed = self._pending_seed, None
        self._window = _Backward(index, tape, launches, len(launches or ()), loss, grads, measured, stats, seed)
        self._window._produced = by_ptr

    # -- reads -------------------------------------------------------------------------------------------------
    @property
    def carrying(self) -> bool:
        return bool(self._carries)

    @property
    def watching(self) -> bool:
        return self._window is not None and bool(self._window.measured)

    def touches(self, arguments) -> bool:
        """Some argument is a gradient the last backward produced (checked before anything costlier)."""
        produced = self._window.produced
        return any(getattr(value, "ptr", None) in produced for _label, value in arguments)

    def idle(self, index: int, boundary: bool) -> bool:
        """Backward ``index`` has nothing to compare (the common case, a few attribute reads): the window closes."""
        last = self._window
        if last is None or not last.reads or boundary or last.index != index - 1:
            self._window, self._carries, self._pending_seed = None, {}, None
            return True
        return False

    def read(self, array, reader: str, site: str | None, namer, differenced=None) -> CarriedRead | None:
        """A read of ``array`` (host read, copy source) at ``site``: recorded, and the CarriedRead when it read a
        sum (``namer``: owner array → its gradient's subject). ``differenced``: how to ask whether the reading code
        takes differences of its reads (asked only then)."""
        window = self._window
        if window is None:
            return None
        grad = window.containing(array)
        if grad is None:
            return None
        key = grad.grad.ptr
        if key not in window.reads:
            window.reads[key] = (reader, site)
            if window.seed is None:
                window.seed = _seed(window.loss, window.grads)
        carry = self._carries.get(key)
        if carry is None or not carry.confirmed or carry.reported:
            return None
        carry.reported = True
        if site != carry.earlier_site:
            # read somewhere else than the earlier read: the program reads two quantities it tells apart (task 1's
            # gradient logged, then the total of both tasks it steps on; g0 and g1 bound to two names): the sum may
            # be the one it means. A row read in a loop comes back to its own line each time.
            return None
        if differenced is None:
            from gradcheck.observe.differencing import reads_take_differences

            differenced = reads_take_differences
        verdicts = [differenced(s) for s in dict.fromkeys((site, carry.earlier_site)) if s]
        taken = True if any(v is True for v in verdicts) else (None if not verdicts or None in verdicts else False)
        return CarriedRead(
            subject=namer(grad.owner),
            reader=reader,
            site=site,
            earlier_reader=carry.earlier_reader,
            earlier=carry.earlier,
            backward=carry.backward,
            seeds=carry.seeds,
            carried_norm=float(carry.grad.norm),
            read_norm=float(carry.read_norm),
            differenced=taken,
        )

    def launch(self, call, arguments, reader: str, site: str | None, namer) -> list[CarriedRead]:
        """A launch outside backward: each produced gradient its code loads is read; an update's (a launch that
        also writes the gradient's owner) is its step, not a read."""
        window = self._window
        if window is None or not window.produced:
            return []
        touched = [(label, window.produced[p]) for label, value in arguments if (p := getattr(value, "ptr", None))
                   in window.produced]  # fmt: skip
        if not touched:
            return []
        from gradcheck.tape.launch_access import call_access
        from gradcheck.warp_compat.kernel_tree import kernel_function

        access = call_access(call)
        written = {a.ptr for a in access.arrays("writes")}  # the code may write it: the owner's update
        found = []
        for label, grad in touched:
            if getattr(grad.owner, "ptr", None) in written or not access.role(label).reads:
                continue

            def subtracts(_site, kernel=call.kernel, label=label):
                from gradcheck.observe.differencing import kernel_subtracts

                return kernel_subtracts(kernel_function(kernel), label)

            record = self.read(grad.grad, reader, site, namer, differenced=subtracts)
            if record is not None:
                found.append(record)
        return found


def _produced(measured: dict, stats: dict) -> dict:
    by_ptr = {}
    for key, array in measured.items():
        grad, found = array.grad, stats.get(key)
        if grad is not None and found is not None:
            by_ptr[grad.ptr] = _Grad(grad, array, found.checksum, found.norm)
    return by_ptr


def _spans(produced: dict) -> tuple:
    """(starts, [(end, gradient)], whether two extents overlap) of the produced gradients' memory, by start."""
    spans = sorted(((g.grad.ptr, _end(g), g) for g in produced.values() if g.grad.ptr), key=lambda s: s[:2])
    overlap = any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:]))
    return [start for start, _, _ in spans], [(end, g) for _, end, g in spans], overlap


def _end(grad) -> int:
    return grad.grad.ptr + int(getattr(grad.grad, "capacity", 0) or 0)


def _same_computation(last: _Backward, tape) -> bool:
    """The same tape, not recorded again since (``tape.reset()`` binds a new launch list), or one that recorded the
    same launches on the same arrays."""
    launches = getattr(tape, "launches", None)
    if tape is last.tape:
        return launches is last.launches and len(launches or ()) == last.count
    return bool(launches) and _signature(launches) == _signature(last.launches)


def _signature(launches) -> tuple:
    from gradcheck.warp_compat import kernel_launches

    if not launches:
        return ()
    kernels = tuple(
        (getattr(kernel, "key", id(kernel)), tuple(getattr(a, "ptr", None) for a in arguments))
        for _i, kernel, arguments in kernel_launches(launches)
    )
    return kernels, len(launches)


def _seed(loss, grads) -> tuple:
    """What a backward was seeded with: its loss array, or each seeded output with a fingerprint of its seed."""
    from gradcheck.observe.values import fingerprint

    if loss is not None:
        return (("loss", getattr(loss, "ptr", id(loss))),)
    if grads:
        return tuple(sorted((getattr(a, "ptr", None) or id(a), fingerprint(s)) for a, s in grads.items()))
    return (("unseeded", None),)  # tape.backward() with seeds set by hand: none to tell apart


def _seeded_gradients(loss, grads) -> set:
    """Gradient buffers backward overwrites (the loss's, the seeded outputs'): never carried."""
    owners = [loss, *(grads or ())]
    return {getattr(getattr(a, "grad", None), "ptr", None) for a in owners if a is not None}


def _seed_words(last: _Backward, loss, grads) -> str:
    """How backward ``last`` and the one starting now were seeded differently, in words."""

    def outputs(loss_, grads_) -> set:
        return {getattr(a, "ptr", None) or id(a) for a in ([loss_] if loss_ is not None else list(grads_ or ()))}

    if outputs(last.loss, last.grads) != outputs(loss, grads):
        return "seeded on another output"
    return "seeded on the same output with other seed values"


class RowReadHooks(ObserverPart):
    """The observer's part for Jacobian rows: RowReads fed from the hooks (the backwards' numbers told by the
    observer), its records kept in the iteration open now (``context.current()``)."""

    def __init__(self, context: PartContext) -> None:
        self.guard, self.names, self._current = context.guard, context.names, context.current
        self._rows: RowReads | None = None

    @property
    def rows(self) -> RowReads:
        if self._rows is None:
            from gradcheck.observe import values

            self._rows = RowReads(lambda arrays: [values.checksums(arrays).get(id(a)) for a in arrays])
        return self._rows

    def forget(self) -> None:
        self.rows.forget()

    on_window_leave = forget

    def before(self, backward: BackwardEvent, boundary: bool) -> None:
        """Backward ``backward.number`` is about to run: the gradients read since the last one it may add to."""
        rows = self.rows
        if not rows.idle(backward.number, boundary):
            with self.guard("jacobian rows"):
                rows.before_backward(backward.number, backward.tape, backward.loss, backward.grads, boundary)

    def after(self, backward: BackwardEvent, it) -> None:
        rows, args = self.rows, (backward.number, backward.tape, backward.loss, backward.grads, backward.measured)
        if rows.carrying:
            with self.guard("jacobian rows"):
                rows.after_backward(*args, it.stats)
        else:
            rows.after_backward(*args, it.stats)  # opens the window only

    def read(self, array, what: str, site: str | None) -> None:
        rows = self.rows
        if rows.watching:
            with self.guard("jacobian rows"):
                from gradcheck.model.sites import short

                self._keep([rows.read(array, f"{what} ({short(site)})", site, self.names.gradient_subject)])

    def launch(self, call, arguments, moved: bool) -> None:
        """A launch outside backward (``moved``: an update ran since the last backward: the next backward is a new
        iteration, no rows to read)."""
        rows = self.rows
        if rows.watching and not moved and rows.touches(arguments):
            with self.guard("jacobian rows"):
                from gradcheck.model.sites import short

                site = call.site
                key = getattr(call.kernel, "key", call.kernel)
                self._keep(rows.launch(call, arguments, f"launch {key} ({short(site)})", site,
                                       self.names.gradient_subject))  # fmt: skip

    def _keep(self, records) -> None:
        found = tuple(r for r in records if r is not None)
        it = self._current()
        if found and it is not None:
            it.carried_reads = it.carried_reads + found
