"""Where a NaN/Inf (or an exploding adjoint) starts in a tape's backward: the first launch, in backward order.

After ``tape.backward(loss)`` a param's gradient is NaN: the checks on the final arrays can only name the param.
The launch that made the first bad adjoint is found here by bisection over the recorded launches, never by running
the program's forward again. P(k): "after the backward of launches n-1 down to k (Warp's order), some gradient
buffer the tape knows is non-finite" (for ``kind="growth"``: or has an L2 norm over ``threshold``). P(n) (the seed
alone) must be false and P(0) (the whole backward) true; the bisection keeps one k where P holds and one above it
where it does not, and ends with them adjacent: launch k took every gradient buffer from good to one bad. That holds
whether or not P is monotone (a later adjoint may zero a bad buffer again), so the answer is always a launch that
made a bad adjoint out of good ones, found in ceil(log2(n)) partial backwards plus the two ends.

Each partial backward zeroes every gradient buffer, seeds as ``Tape.backward`` does, and runs the entries
launches[k:] in reverse exactly as Warp runs them (the same adjoint lookups through ``tape.get_adjoint``, the same
launch options); one statistics launch per scalar type (gradcheck.measure.stats) then reads a few numbers per buffer.
The program's state is put back afterwards, also on an exception: every gradient buffer a partial backward can write
is copied first and copied back, the tape's ``gradients`` dict is restored (``get_adjoint`` adds to it), and a
``grads`` target that had no ``.grad`` gets none back. Forward values are not copied: adjoint launches read them.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_ENTRIES = 20_000  # more tape entries than this: not searched (n log n adjoint launches, two copies of every grad)
KINDS = ("nonfinite", "growth")


@dataclass(frozen=True)
class BackwardOrigin:
    """The first launch of a backward (in Warp's reverse order) whose adjoint output went bad."""

    index: int  # position on tape.launches: the same launch whatever else the tape holds
    kernel: str  # kernel key; "wp.copy" for the adjoint a whole-array copy records, "record_func" for other callables
    site: str | None  # "file:line" of the wp.launch call, from the metadata Warp records with it; None if there is none
    step: int  # 1-based occurrence of this kernel on the tape: in a rollout, the step the blow-up starts at
    steps: int  # occurrences of this kernel on the tape: "step 14 of 20" says how far back from the loss it is
    array: str  # "kernel.argument.grad": the adjoint the launch made bad (struct fields: "kernel.argument.field.grad")
    value: float  # non-finite entries in it (kind="nonfinite"), or its L2 norm (kind="growth"; inf if it has NaN/Inf)
    incoming_finite: bool  # the adjoints the launch read (what it wrote: outputs, inputs in place) were good before
    probes: int  # partial backwards run (the seed alone and the whole backward included): what the answer cost


def backward_origin(
    tape, loss=None, grads=None, *, kind: str = "nonfinite", threshold: float | None = None
) -> BackwardOrigin | None:
    """The launch where the backward of ``tape`` first makes a gradient buffer bad, or None.

    ``loss``/``grads`` seed the backward as they do for ``Tape.backward``. ``kind="nonfinite"``: bad is NaN/Inf;
    ``kind="growth"``: also an L2 norm over ``threshold``. None when the seed itself is bad, when the whole backward
    is good (nothing to find: the bad gradient did not come from this tape's backward), with neither ``loss`` nor
    ``grads`` (the seed is unknown), with more than MAX_ENTRIES entries, during a graph capture, when the tape holds a
    ``record_func`` callback other than Warp's copy adjoint (running the program's code again could change what it
    does), or when a buffer the backward would touch may have been freed by the program. The program's gradients are
    left as they were."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    if kind == "growth" and threshold is None:
        raise ValueError('kind="growth" needs a threshold (an L2 norm)')
    launches = list(getattr(tape, "launches", None) or ())
    if not launches or len(launches) > MAX_ENTRIES or (loss is None and not grads):
        return None
    if loss is not None and (getattr(loss, "grad", None) is None or loss.size != 1):
        return None  # Tape.backward refuses such a loss: there is no backward to reproduce
    if any(entry.__class__ is not list and not _warp_copy(entry) for entry in launches):
        # a tape.record_func callback of the program's may do anything besides writing gradients (print, count,
        # call torch): running it again would change what the program does. Only Warp's own copy adjoints are run.
        return None

    from gradcheck.warp_compat import capturing
    from gradcheck.warp_compat.runtime import no_active_tape, quiet

    if capturing():
        return None
    with quiet(), no_active_tape():
        search = _Search(tape, launches, loss, grads or {}, kind, threshold)
        try:
            if not search.prepare():
                return None
            return search.run()
        finally:
            search.restore()


def _warp_copy(entry) -> bool:
    """The adjoint ``wp.copy`` records (a closure of Warp's own, whole-array or not)."""
    from gradcheck.warp_compat import recorded_copy

    return recorded_copy(entry) is not None


class _Search:
    """The bisection, with the program's gradient buffers copied before and put back after."""

    def __init__(self, tape, launches: list, loss, grads: dict, kind: str, threshold: float | None):
        self.tape, self.launches, self.loss, self.grads = tape, launches, loss, grads
        self.growth = kind == "growth"
        self.threshold = float(threshold) if threshold is not None else None
        self.buffers: list = []  # every gradient buffer a partial backward may write (or the seed fills)
        self.index: dict[int, int] = {}  # id(buffer) → position in buffers
        self.saved: list = []  # (buffer, copy) of the program's buffers
        self.attached: list = []  # grads targets given a private .grad for the search (they had none)
        self.gradients = None  # the tape's gradients dict as the program left it
        self.tables: dict[int, tuple] = {}  # k → (bad mask, non-finite counts, norms) after launches[k:]
        self.float_positions: list[int] = []
        self.plan = None

    # -- the program's state ---------------------------------------------------------------------------

    def prepare(self) -> bool:
        """Collect and copy the buffers; False when one of them (or a forward array) may have been freed."""
        import warp as wp

        from gradcheck.measure.liveness import readable
        from gradcheck.warp_compat import array_class, arrays_of, gradient_reader, is_float_array

        array_type, grad_of = array_class(), gradient_reader()
        forwards: dict[int, object] = {}
        grads: dict[int, object] = {}

        def add_grad(buffer) -> None:
            if buffer is not None and getattr(buffer, "ptr", None):
                grads.setdefault(id(buffer), buffer)

        for entry in self.launches:
            if entry.__class__ is list:
                for value in (*entry[3], *entry[4]):
                    for array in arrays_of(value, array_type):
                        forwards.setdefault(id(array), array)
                        add_grad(grad_of(array))
        for key, value in getattr(self.tape, "gradients", {}).items():
            for array in arrays_of(key, array_type):
                add_grad(grad_of(array))
            for array in arrays_of(value, array_type):
                add_grad(array)
        if self.loss is not None:
            add_grad(self.loss.grad)
        for target in self.grads:
            add_grad(target.grad)
        if not all(map(readable, forwards.values())) or not all(map(readable, grads.values())):
            return False
        self.gradients = dict(getattr(self.tape, "gradients", {}))
        for buffer in grads.values():
            self.saved.append((buffer, wp.clone(buffer, requires_grad=False)))
        for target, seed in self.grads.items():
            if target.grad is None:  # Tape.backward would make the seed itself the target's .grad: a private copy
                target.grad = wp.clone(seed, requires_grad=False)
                self.attached.append(target)
                add_grad(target.grad)
        self.buffers = list(grads.values())
        self.index = {id(buffer): i for i, buffer in enumerate(self.buffers)}
        self.float_positions = [i for i, buffer in enumerate(self.buffers) if is_float_array(buffer)]
        return True

    def restore(self) -> None:
        import warp as wp

        for buffer, copy in self.saved:
            wp.copy(buffer, copy)
        for target in self.attached:
            target.grad = None
        if self.gradients is not None:
            self.tape.gradients.clear()
            self.tape.gradients.update(self.gradients)
        self.saved, self.attached = [], []

    # -- the search ------------------------------------------------------------------------------------

    def run(self) -> BackwardOrigin | None:
        n = len(self.launches)
        if self.bad(n).any() or not self.bad(0).any():
            return None
        good, bad = n, 0  # P(good) false, P(bad) true: launch `bad` makes a buffer bad when they are adjacent
        while good - bad > 1:
            middle = (good + bad) // 2
            if self.bad(middle).any():
                bad = middle
            else:
                good = middle
        return self.describe(bad)

    def bad(self, k: int):
        """The bad-buffer mask after the backward of launches[k:] (computed once per k)."""
        if k not in self.tables:
            self.backward(k)
            self.tables[k] = self.measure()
        return self.tables[k][0]

    def backward(self, k: int) -> None:
        """Zero, seed, and run launches[k:] backward as ``Tape.backward`` runs them."""
        import warp as wp

        from gradcheck.warp_compat import launch_accepts

        for buffer in self.buffers:
            buffer.zero_()
        if self.loss is not None:
            self.loss.grad.fill_(1.0)
        for target, seed in self.grads.items():
            target.grad.assign(seed)
        tape = self.tape
        for entry in reversed(self.launches[k:]):
            if callable(entry):
                entry()
                continue
            kernel = entry[0]
            if not _runs_backward(kernel):
                continue  # Warp's backward skips it (1.5.1 launched it, and its adjoint wrote nothing)
            inputs, outputs = entry[3], entry[4]
            adj_inputs = [tape.get_adjoint(a) for a in inputs]
            adj_outputs = [tape.get_adjoint(a) for a in outputs]
            options = {"device": entry[5], "max_blocks": entry[2]}
            if launch_accepts("record_tape"):
                options["record_tape"] = False
            if launch_accepts("block_dim") and len(entry) > 6 and entry[6]:
                options["block_dim"] = _resolved_block_dim(entry[6])
            wp.launch(
                kernel,
                entry[1],
                inputs=inputs,
                outputs=outputs,
                adj_inputs=adj_inputs,
                adj_outputs=adj_outputs,
                adjoint=True,
                **options,
            )

    def measure(self) -> tuple:
        """(bad mask, non-finite counts, norms) over self.buffers: one statistics launch per scalar type."""
        import numpy as np

        from gradcheck.measure.stats import StatsPlan

        count = len(self.buffers)
        nonfinite = np.zeros(count, dtype=np.int64)
        norms = np.zeros(count, dtype=np.float64)
        if self.float_positions:
            if self.plan is None:
                self.plan = StatsPlan()  # kept: the rows are built once for the same buffers, backward after backward
            table = self.plan.table([self.buffers[i] for i in self.float_positions])
            nonfinite[self.float_positions] = table.columns["nans"] + table.columns["infs"]
            norms[self.float_positions] = np.sqrt(table.columns["sumsq"])
        bad = nonfinite > 0
        if self.growth:
            bad |= norms > self.threshold
        return bad, nonfinite, norms

    # -- the answer ------------------------------------------------------------------------------------

    def describe(self, k: int) -> BackwardOrigin:
        from gradcheck.warp_compat import launch_kernel_names, launch_sites, recorded_functions

        bad_after, nonfinite, norms = self.tables[k]
        bad_before = self.tables[k + 1][0]
        entry = self.launches[k]
        names = launch_kernel_names(self.launches)
        site = None
        if entry.__class__ is list:
            site = launch_sites([entry])[0]
            read, written = self._kernel_arguments(entry)
        else:
            copy = next(recorded_functions([entry]))[2]
            if copy is not None:
                names[k] = "wp.copy"
                read, written = self._copy_arguments(copy, names)
            else:
                read, written = [], []
        name = names[k]
        # the argument whose adjoint this launch made bad, else any it left bad, else whatever buffer went bad
        newly = [(label, i) for label, i in written if bad_after[i] and not bad_before[i]]
        chosen = newly or [(label, i) for label, i in written if bad_after[i]]
        if not chosen:
            fresh = [i for i in range(len(self.buffers)) if bad_after[i] and not bad_before[i]]
            i = fresh[0] if fresh else int(bad_after.argmax())
            chosen = [(self._label(self.buffers[i]) or f"{name}.grad", i)]
        label, i = chosen[0]
        if self.growth:
            value = float("inf") if nonfinite[i] else float(norms[i])
        else:
            value = float(nonfinite[i])
        if entry.__class__ is not list and not read:  # a callable: what it reads is unknown, every buffer stands in
            incoming = not bad_before.any()
        else:
            incoming = not any(bad_before[i] for _label, i in read)
        steps = names.count(name)
        step = names[: k + 1].count(name)
        return BackwardOrigin(k, name, site, step, steps, label, value, incoming, len(self.tables))

    def _kernel_arguments(self, entry) -> tuple[list, list]:
        """(adjoints its backward reads, all arguments' adjoints) of a kernel entry as (label, buffer position).
        It reads the adjoints of what its forward may have written (``may_write``, gradcheck.tape.launch_access:
        outputs, and inputs updated in place): never missing one, a bad adjoint that came in is never said made."""
        from gradcheck.tape.launch_access import launch_access
        from gradcheck.warp_compat import argument_label

        kernel = entry[0]
        read, written = [], []
        for use in launch_access(kernel, entry[3], entry[4]).arguments:
            base = argument_label(kernel, use.role.position)
            for suffix, array in _leaves(use.value):
                i = self._position(array)
                if i is None:
                    continue
                written.append((f"{base}{suffix}.grad", i))
                if use.role.may_write:
                    read.append((f"{base}{suffix}.grad", i))
        return read, written

    def _copy_arguments(self, copy, names) -> tuple[list, list]:
        dest, src = copy
        read = [("wp.copy.dest.grad", i) for i in [self._position(dest)] if i is not None]
        written = [("wp.copy.src.grad", i) for i in [self._position(src)] if i is not None]
        return read, written + read

    def _position(self, array) -> int | None:
        from gradcheck.warp_compat import gradient_reader

        grad = gradient_reader()(array)
        return self.index.get(id(grad)) if grad is not None else None

    def _label(self, buffer) -> str | None:
        """``kernel.argument.grad`` of the first launch whose argument has ``buffer`` as its adjoint."""
        from gradcheck.warp_compat import argument_label, gradient_reader, kernel_launches

        grad_of = gradient_reader()
        for _index, kernel, arguments in kernel_launches(self.launches):
            for position, value in enumerate(arguments):
                for suffix, array in _leaves(value):
                    if grad_of(array) is buffer:
                        return f"{argument_label(kernel, position)}{suffix}.grad"
        return None


def _leaves(value, suffix: str = ""):
    """(".field" path, array) for a launch argument: the array itself, or a struct's array fields (recursively)."""
    from gradcheck.warp_compat import array_class, is_struct_instance, struct_fields

    if isinstance(value, array_class()):
        yield suffix, value
    elif is_struct_instance(value):
        for name, field, _var in struct_fields(value):
            yield from _leaves(field, f"{suffix}.{name}")


def _runs_backward(kernel) -> bool:
    """Whether Warp's Tape.backward launches the kernel's adjoint: its own enable_backward, else its module's."""
    flag = (getattr(kernel, "options", None) or {}).get("enable_backward")
    if flag is None:
        flag = (getattr(getattr(kernel, "module", None), "options", None) or {}).get("enable_backward", True)
    return flag is not False


def _resolved_block_dim(block_dim: int):
    """The recorded (already resolved) block_dim, marked so as Warp's backward marks it where Warp has the marker
    (1.19: a CPU block_dim is resolved against the config again otherwise)."""
    from gradcheck.warp_compat.runtime import internal_module

    marker = getattr(internal_module("context"), "_ResolvedBlockDim", None)
    return marker(block_dim) if marker is not None else block_dim
