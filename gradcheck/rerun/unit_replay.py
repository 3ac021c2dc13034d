"""One unit of the per-launch adjoint test: one launch (or a few, for a split adjoint) replayed on private copies.

The dot-product test: random output weights w, a direction u of the unit's inputs (the program's own tangent when
there is one), and <w, dF/du> by the noise-aware central differences of gradcheck.rerun.finite_diff against
<J^T w, u> from the unit's adjoints run as the tape's backward would run them (inputs as the launches read them,
outputs as they left them). And the accumulation test: with the input gradients prefilled at random, the adjoint
must add to them. Only inputs that depend on the params and outputs the loss depends on take part.
"""

from __future__ import annotations

import math

from gradcheck.model.options import FDOptions
from gradcheck.model.trace import LaunchVerdict
from gradcheck.rerun.finite_diff import Rollouts, param_scale
from gradcheck.rerun.launch_record import Launch
from gradcheck.rerun.launch_values import adjoint_of, float_numbers, has_floats, substitute, with_float_numbers
from gradcheck.rerun.replay_buffers import BufferPool

__all__ = ["BufferPool", "test_unit"]
_UNPREPARED = object()  # a launch not prepared yet (prepared_launch may answer None: launch it plainly)


def _label(unit: list[Launch]) -> tuple[int, str, str | None]:
    first = unit[0]
    return first.index, first.kernel.key, first.where


def _not_checked(unit, why: str) -> LaunchVerdict:
    index, key, where = _label(unit)
    return LaunchVerdict(index, key, where, "not-checked", note=why)


class _UnitRollouts(Rollouts):
    """The judge's rollouts for one unit: the weighted outputs of the unit replayed at perturbed inputs."""

    def __init__(self, evaluate):
        self.evaluate, self.count, self.output_size = evaluate, 0, 1

    def loss(self, delta: dict) -> float:
        self.count += 1
        return self.evaluate(delta)


def _tangent(unit: list[Launch], keys: list[int], tangents) -> dict | None:
    """The program's own tangent of the unit's inputs (each as the first launch of the unit read it), or None
    when there is none or it is zero."""
    import numpy as np

    if not tangents:
        return None
    found = {}
    for key in keys:
        for launch in unit:
            if key in launch.pre and key in tangents.get(launch.index, {}):
                found[key] = tangents[launch.index][key]
                break
        else:
            found[key] = None
    if any(v is None for v in found.values()) or not any(np.any(v != 0) for v in found.values()):
        return None
    return found


def test_unit(
    unit: list[Launch], options: FDOptions, rng, read_after, path, tangents=None, pool=None, per_input: bool = False
) -> LaunchVerdict:
    """The verdict on one unit (see the module docstring). ``pool``: a BufferPool the unit's private buffers come
    from and go back to (a few thousand units allocate far less). ``per_input``: each input is also tested alone
    (see _Replay.judge)."""
    refused = _refused(unit, path)
    if isinstance(refused, LaunchVerdict):
        return refused
    if refused:
        return _not_checked(unit, refused)
    pool = pool if pool is not None else BufferPool()
    replay = _Replay(unit, pool)
    try:
        chosen = replay.choose(read_after, path)
        if isinstance(chosen, str):
            return _not_checked(unit, chosen)
        finals, perturbable = chosen
        return replay.judge(finals, perturbable, options, rng, tangents, per_input)
    finally:
        replay.release()


def _refused(unit: list[Launch], path) -> str | LaunchVerdict | None:
    """Why the unit cannot be replayed (a verdict of its own for a kernel without adjoint on the gradient path),
    or None."""
    from gradcheck.warp_compat import backward_disabled, module_current

    depends, feeds = path
    for launch in unit:
        if launch.captured:
            return "launched during graph capture: its inputs cannot be copied then (check it on a run without capture)"
        if any(_holds_pointers(a) for a in launch.arrays_in + launch.arrays_out):
            return (
                "it takes an array of structs with array fields: their pointers lead into the program's memory (a "
                "replay would read and write it, maybe freed), not to private copies"
            )
        if not module_current(launch.kernel, launch.options["device"]):
            return "its module changed since it ran (kernels defined in it since): not rebuilt on the program's behalf"
        if not launch.pre and (launch.arrays_in or launch.arrays_out):
            return "over the memory budget for copies of forward values"
        if backward_disabled(launch.kernel):
            if launch.reads & depends and launch.writes & feeds:
                index, key, where = _label([launch])
                note = (
                    "built with enable_backward=False on the gradient path: Warp's backward skips it, so every "
                    "gradient through it is dropped (zero upstream)"
                )
                return LaunchVerdict(index, key, where, "no-backward", note=note)
            return "built with enable_backward=False (off the gradient path)"
    return None


class _Replay:
    """The unit's launches run again on private buffers: forward (perturbed or not), then adjoint."""

    def __init__(self, unit: list[Launch], pool: BufferPool):
        self.unit, self.pool = unit, pool
        self.arrays: dict[int, object] = {}
        for launch in unit:
            for v in launch.arrays_in + launch.arrays_out:
                self.arrays.setdefault(id(v), v)
        self.outputs = {id(v) for launch in unit for v in launch.arrays_out}  # as the launches declared them
        self.first_pre: dict = {}
        for launch in unit:
            for key, copy in launch.pre.items():
                self.first_pre.setdefault(key, copy)
        self.post: dict[int, dict] = {}  # launch index → its arrays as it left them (the base run)
        self.buffers = {key: pool.like(self.first_pre[key]) for key in self.arrays}
        # buffers that may differ from first_pre now (restored before the next run): every one until the base run
        # says which the unit writes; Python's cost of a copy, not its bytes, is what a replay spends most on
        self._dirty, self._writes = set(), set(self.arrays)
        self._adj, self._at_base = None, False
        # each launch packed once on these buffers and run again by each rollout (forward) and adjoint: the same
        # buffers every time, so the same arguments. Forward code never reads an array's .grad (only adjoint code
        # does), so the adjoint buffers aliased later change nothing a prepared forward launch runs on
        self._forward_runs: dict[int, object] = {}
        self._adjoint_runs: dict[int, object] = {}
        self._numbers: dict[int, object] = {}  # id(copy) → its float numbers (a perturbed input, every rollout)
        declared = set().union(*(launch.writes for launch in unit))  # outputs, and inputs the source stores into
        work = self.forward(keep=True)
        # written: the declared outputs, and whatever else changed. Bytes, not values: writing -0.0 over 0.0 is a
        # write (Newton's eval_rigid_tau stores -f into its input body_f_ext), and Warp's adjoint treats a written
        # input's gradient as an output's. An array the kernels' source never writes cannot have changed (an
        # unreadable source: any may have).
        candidates = declared if all(launch.access_known for launch in unit) else set(self.arrays)
        self.changed = self.outputs | {
            key for key in candidates - self.outputs if self._raw(work[key]) != self._raw(self.first_pre[key])
        }
        self._writes = self.changed | declared
        self.base = {key: pool.like(work[key]) for key in self.changed}
        # as the tape's backward sees them: only arrays that require grad have adjoints (kernels test for them:
        # Featherstone's solve adjoint returns early without one), so only those are perturbed and weighed
        self.grads = {key for key, a in self.arrays.items() if getattr(a, "requires_grad", False)}

    def forward(self, perturb: dict | None = None, keep: bool = False) -> dict:
        """Run the unit from the values its first launch read (``perturb``: key → added to an input)."""
        perturb, pool = perturb or {}, self.pool
        work = self.buffers
        for key in self._dirty:
            pool.copy(work[key], self.first_pre[key])
        dirty = set(perturb) | self._writes
        produced: set[int] = set()  # arrays an earlier launch of the unit wrote: those flow on
        for position, launch in enumerate(self.unit):
            # everything else as this launch found it in the forward (launches outside the unit may have run in
            # between), with the perturbation of the unit's inputs applied again
            for key, copy in launch.pre.items():
                if key in produced or (position == 0 and key not in perturb):
                    continue
                if key in perturb:
                    pool.put(work[key], with_float_numbers(pool.values(copy), self._floats(copy) + perturb[key]))
                else:
                    pool.copy(work[key], copy)
                dirty.add(key)
            self._run(position, launch, work)
            produced |= launch.writes
            if keep:  # what it wrote, declared or not (an input updated in place)
                self.post[launch.index] = {
                    key: pool.like(work[key])
                    for key, copy in launch.pre.items()
                    if key in launch.writes or (not launch.access_known and self._raw(work[key]) != self._raw(copy))
                }
        self._dirty, self._at_base = dirty, keep
        return work

    def _run(self, position: int, launch: Launch, work: dict) -> None:
        """The unit's launch at ``position`` on the private buffers, prepared on its first run."""
        run = self._forward_runs.get(position, _UNPREPARED)
        if run is _UNPREPARED:
            run = self._forward_runs[position] = self.pool.prepared.get(launch, _arguments(launch, work, None))
        if run is None:
            _launch(launch, work)
        else:
            run.launch()

    def _floats(self, copy):
        found = self._numbers.get(id(copy))
        if found is None:
            found = self._numbers[id(copy)] = float_numbers(self.pool.values(copy))
        return found

    def _raw(self, array) -> int:
        """CRC of the array's bytes (a buffer's or a recorded copy's: both the replay's own)."""
        from gradcheck.measure.fingerprints import values_crc

        return values_crc(self.pool.values(array))

    def release(self) -> None:
        """The private buffers back to the pool (the verdict keeps none of them)."""
        kept = [*self.buffers.values(), *(self._adj or {}).values(), *getattr(self, "base", {}).values()]
        for buffer in kept + [b for post in self.post.values() for b in post.values()]:
            self.pool.give(buffer)
        self.buffers, self._adj, self.post = {}, None, {}
        self._forward_runs, self._adjoint_runs = {}, {}

    def choose(self, read_after, path) -> tuple[list, list] | str:
        """(outputs to weigh, inputs to perturb) on the gradient path, or why there are none.

        Inputs are the arrays a launch of the unit reads before the unit wrote them, in-place ones included (an
        input the launch also writes: perturbed at the value it had before, weighed at the value it left)."""
        arrays, unit, written = self.arrays, self.unit, self.changed
        # in argument order, never in the order of a set of ids: which array gets which random weight and direction
        # must not depend on memory addresses (the same launch, the same verdict)
        order: dict[int, int] = {}
        for launch in unit:
            for value in launch.arrays_in + launch.arrays_out:
                order.setdefault(id(value), len(order))
        read, produced = [], set()
        for launch in unit:
            read += [id(v) for v in launch.arrays_in if id(v) not in produced]
            produced |= launch.writes
        depends, feeds = path
        grads = self.grads
        last = unit[-1].index
        finals = [k for k in written if read_after(k, last) and has_floats(arrays[k]) and k in grads and k in feeds]
        finals.sort(key=lambda k: order.get(k, len(order)))
        perturbable = [k for k in dict.fromkeys(read) if k in grads and k in depends and has_floats(arrays[k])]
        if not finals or not perturbable:
            return "no float input to perturb or float output to weigh on the gradient path"
        self.in_place = [k for k in perturbable if k in written]
        return finals, perturbable

    def adjoint(self, weights: dict, perturbable: list, prefill: dict) -> dict:
        """The unit's adjoints run backward as the tape runs them: output weights in, input gradients out
        (``prefill``: what the input gradients hold before).

        As on the tape, each replayed array that carries a gradient in the program has its adjoint buffer as its
        ``.grad``: Warp's adjoint of a store clears the incoming gradient only then (an in-place ``f[i] = f[i] +
        g`` would otherwise count it twice), and reads it as the program's backward would."""
        own, pool = self.buffers, self.pool  # the forward's buffers: restored before its next run
        if self._adj is None:  # one set of adjoint buffers a unit, aliased once
            self._adj = {
                key: self.pool.like(self.first_pre[key], zero=True) for key in self.arrays if key in self.grads
            }
            for key, buffer in self._adj.items():
                if not getattr(self.arrays[key], "retain_grad", False):
                    own[key].grad = buffer
        else:
            for buffer in self._adj.values():
                pool.zero(buffer)
        adj = self._adj
        for key, values in {**weights, **prefill}.items():
            pool.put(adj[key], with_float_numbers(pool.values(adj[key]), values))
        # an adjoint launch writes no forward value: one launch left as its base run left it needs no copy
        as_left = len(self.unit) == 1 and self._at_base
        if not as_left:
            self._dirty = set(self.arrays)
        for launch in reversed(self.unit):
            # as the tape's backward runs it: inputs as the launch read them, outputs as it left them
            if not as_left:
                for key, copy in {**launch.pre, **self.post[launch.index]}.items():
                    pool.copy(own[key], copy)
            run = self._adjoint_runs.get(launch.index, _UNPREPARED)
            if run is _UNPREPARED:  # prepared once the adjoint buffers are aliased: the second run reuses it
                run = self._adjoint_runs[launch.index] = self.pool.prepared.get(launch, _arguments(launch, own, adj))
            if run is None:
                _launch(launch, own, adj)
            else:
                run.launch()
        return {key: float_numbers(pool.values(adj[key])) for key in perturbable}

    def judge(
        self, finals: list, perturbable: list, options: FDOptions, rng, tangents, per_input: bool = False
    ) -> LaunchVerdict:
        """The dot-product and accumulation tests. ``per_input``: with several inputs, each is also tested alone
        along its part of the direction, and the worst converged direction is the verdict: a wrong adjoint of one input
        is otherwise diluted by the right ones (tile_matmul's C beside A and B) below the error band."""
        import numpy as np

        from gradcheck.rerun.finite_diff import F32_EPS, Judge

        base, unit = self.base, self.unit
        pool = self.pool
        base_floats = {key: float_numbers(pool.values(base[key])) for key in finals}
        weights = {key: rng.standard_normal(base_floats[key].shape) for key in finals}
        direction = self._direction(perturbable, rng, tangents)

        def weighted(work: dict) -> float:
            return float(sum(np.sum(weights[k] * float_numbers(pool.values(work[k]))) for k in finals))

        magnitude = float(sum(np.sum(np.abs(weights[k] * base_floats[k])) for k in finals))
        clean = self.adjoint(weights, perturbable, {})
        # the accumulation test on inputs only: an in-place array's gradient arrives in the same buffer
        pure = [key for key in perturbable if key not in self.in_place]
        prefill = {key: rng.standard_normal(direction[key].shape) for key in pure}
        filled = self.adjoint(weights, perturbable, prefill) if pure else clean
        rollouts = _UnitRollouts(lambda delta: weighted(self.forward(delta)))
        judge = Judge(rollouts, weighted(base), options, sigma=F32_EPS * max(magnitude, 1e-30))

        def probe(keys: list, along: dict):
            part = {k: along[k] if k in keys else 0.0 * along[k] for k in perturbable}
            ad = sum(float(np.sum(clean[k] * part[k])) for k in keys)
            return ad, judge.probe("unit", ad, part, 0.0)

        ad, found = probe(perturbable, direction)
        pairs = [(ad, found.fd)] if found.converged else []  # (adjoint, FD) of every settled direction: its shape
        if per_input and math.isfinite(ad):
            # one random direction can cancel a wrong part by chance (Warp 1.16's ternary: the dropped half summed
            # to 0.2% of the rest); a second one, and each input alone, do not
            others = [self._direction(perturbable, rng, None)]
            tries = [(perturbable, d) for d in others] + [([k], direction) for k in perturbable if len(perturbable) > 1]
            for keys, along in tries:
                ad_k, alone = probe(keys, along)
                if alone.converged:
                    pairs.append((ad_k, alone.fd))
                worse = alone.converged and alone.rel_error > (found.rel_error if found.converged else -1.0)
                if worse and math.isfinite(ad_k) and alone.rel_error >= options.warn:
                    ad, found = ad_k, alone
        index, key, where = _label(unit)
        fields = (found.rel_error, ad, found.fd, rollouts.count)
        shape = {"probes": tuple(pairs)}
        if pure and _overwrites(clean, prefill, filled, pure, {k: _epsilon(self._adj[k]) for k in pure}):
            note = "its adjoint overwrites the input gradients instead of adding to them"
            return LaunchVerdict(index, key, where, "assigns", *fields, note=note, **shape)
        if not math.isfinite(ad):  # an infinite derivative (a cusp) or NaN: nonfinite's to report, not a mismatch
            return LaunchVerdict(index, key, where, "no-verdict", *fields, note="its adjoint is not finite here")
        if not found.converged:
            return LaunchVerdict(index, key, where, "no-verdict", *fields, **shape)
        if found.rel_error < options.warn:
            return LaunchVerdict(index, key, where, "ok", *fields, **shape)
        note = (
            f"it updates {_names(unit, self.in_place)} in place, and Warp's backward replays the kernel with the "
            "overwritten values"
            if self.in_place
            else None
        )
        return LaunchVerdict(index, key, where, "mismatch", *fields, note=note, **shape)

    def _direction(self, perturbable: list, rng, tangents) -> dict:
        """The program's tangent of the inputs when it reaches them, else a random one scaled per array; of the
        size of the inputs' scales together."""
        import numpy as np

        x0 = {key: self._floats(self.first_pre[key]) for key in perturbable}
        scale = {key: param_scale(x0[key]) for key in perturbable}
        raw = _tangent(self.unit, perturbable, tangents)
        if raw is None:
            raw = {key: scale[key] * rng.standard_normal(x0[key].shape) for key in perturbable}
        norm = math.sqrt(sum(float(np.sum(r * r)) for r in raw.values())) or 1.0
        size = math.sqrt(sum(scale[key] ** 2 for key in perturbable))
        return {key: size * raw[key] / norm for key in perturbable}


def _overwrites(clean: dict, prefill: dict, filled: dict, keys: list, epsilon: dict | None = None) -> bool:
    """The adjoint must add to what the input gradients held: filled == prefill + clean, up to the rounding of the
    gradient's own dtype (float16 keeps 3 digits) and of the terms the adjoint summed (an element of 0.02 summed
    from terms of +-2000, warp.examples.optim.example_fluid_checkpoint's pressure: its float32 rounding is that of
    2000, so it is measured against the array's largest adjoint value). An adjoint that assigns loses the prefill
    (unit normal values) outright."""
    import numpy as np

    worst = 0.0
    for k in keys:
        expected = prefill[k] + clean[k]
        if not expected.size:
            continue
        eps = max(1e-4, 50.0 * (epsilon or {}).get(k, 1.2e-7))
        tolerance = eps * (np.abs(prefill[k]) + np.abs(clean[k])) + 1e-5 * float(np.max(np.abs(clean[k]))) + 1e-6
        worst = max(worst, float(np.max(np.abs(filled[k] - expected) / tolerance)))
    return worst > 1.0 and any(np.any(clean[k] != 0) for k in keys)


def _epsilon(array) -> float:
    """The machine epsilon of an array's float numbers (the coarsest of a struct's float fields)."""
    import numpy as np

    dtype = array.numpy().dtype
    kinds = [dtype[name].base for name in dtype.names] if dtype.names else [dtype]
    found = [float(np.finfo(kind).eps) for kind in kinds if kind.kind == "f"]
    return max(found) if found else 1.2e-7


def _launch(launch: Launch, work: dict, adjoints: dict | None = None) -> None:
    """The launch on the private buffers ``work`` (with ``adjoints``: its adjoint, on those adjoint buffers)."""
    import warp as wp

    wp.launch(launch.kernel, launch.dim, **_arguments(launch, work, adjoints))


def _arguments(launch: Launch, work: dict, adjoints: dict | None) -> dict:
    arguments = {
        "inputs": [substitute(v, work) for v in launch.inputs],
        "outputs": [substitute(v, work) for v in launch.outputs],
        "device": launch.options["device"],
        **_launch_options(launch),
    }
    if adjoints is not None:
        arguments["adj_inputs"] = [adjoint_of(v, adjoints) for v in launch.inputs]
        arguments["adj_outputs"] = [adjoint_of(v, adjoints) for v in launch.outputs]
        arguments["adjoint"] = True
    return arguments


def _names(unit: list[Launch], keys: list) -> str:
    """``kernel.argument`` (``kernel.argument.field`` inside a struct) of each key, as the unit's launches name them."""
    from gradcheck.rerun.launch_values import leaf_labels

    labels = {}
    for launch in unit:
        for key, label in leaf_labels(launch).items():
            labels.setdefault(key, label)
    return ", ".join(labels.get(key, "an array") for key in keys)


def _launch_options(launch: Launch) -> dict:
    """The launch's own device, max_blocks and block_dim (block_dim only where this Warp has it), untaped."""
    from gradcheck.warp_compat import launch_accepts

    options = {"max_blocks": launch.options["max_blocks"], "record_tape": False}
    if launch.options.get("block_dim") and launch_accepts("block_dim"):
        options["block_dim"] = launch.options["block_dim"]
    return options


def _holds_pointers(array) -> bool:
    """An array of structs whose records hold arrays (nested records: a pointer, a shape): copying its bytes copies
    the pointers, not what they point at."""
    dtype = getattr(array, "dtype", None)
    if dtype is None or not hasattr(dtype, "vars"):
        return False
    import numpy as np

    try:
        record = np.dtype(dtype.numpy_dtype())  # from the struct's type: the program's memory is not read
    except Exception:  # noqa: BLE001 - another Warp's layout: not replayed by this rule
        return False
    return any(record[name].names is not None for name in record.names or ())
