"""Blame: which launch's adjoint is wrong. A dot-product test per launch, with the values it ran on.

fd-mismatch says the gradient of ``x[7][0]`` is wrong; it cannot say which of 1,601 launches did it. Each
launch is a function from the arrays it reads to the arrays it writes, and its adjoint must be that
function's transpose Jacobian: for random output weights w and a random input direction u,

    <w, (F(x + h u) - F(x - h u)) / 2h>   must equal   <J^T w, u>   (from the launch's adjoint),

and the adjoint must *add* J^T w to the input gradients it is given (Warp accumulates adjoints; an adjoint
that assigns drops every other contribution). Both are checked on the values the launch really ran on:
Warp records a launch only after it ran, and later launches overwrite what it read, so the probe forward
intercepts ``wp.launch`` and keeps a copy of each array argument whenever it changed since its last copy
(a memory budget caps the copies; launches past it are listed as not checked).

Everything runs on private copies: the program's arrays are never written. The finite differences use the
noise-aware judge of gradcheck.probes.finite_diff (disagreements need three agreeing steps).

Split adjoints are not bugs: Newton's Featherstone computes the Cholesky factor in one launch and solves
with it in the next; the factorisation's adjoint is a no-op and the solve's adjoint covers both. A launch
that fails alone is tested again together with the launches that read what it wrote, as one unit: if the
unit passes, its adjoint is split across them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from gradcheck.model.options import FDOptions
from gradcheck.model.trace import LaunchVerdict
from gradcheck.probes.finite_diff import Rollouts, param_scale

COPY_BUDGET_BYTES = 1 << 30
MAX_CONSUMERS = 4  # launches joined at a time to a failing one to test a split adjoint
MAX_UNIT = 6  # launches in one unit at most
MAX_UNITS = 8  # units tried around one failing launch


@dataclass
class _Launch:
    index: int
    kernel: object
    dim: object
    inputs: list
    outputs: list
    options: dict
    pre: dict = field(default_factory=dict)  # id(array) → copy of its values before this launch
    where: str | None = None
    reads: frozenset = frozenset()  # ids of the arrays in inputs
    writes: frozenset = frozenset()  # ids of the arrays in outputs


class LaunchRecorder:
    """Records every launch of one forward with copies of its array arguments as they were before it ran."""

    def __init__(self, budget: int = COPY_BUDGET_BYTES):
        self.launches: list[_Launch] = []
        self.latest: dict[int, tuple[int, object]] = {}  # id → (fingerprint, copy)
        self.budget, self.used = budget, 0
        self.over_budget_at: int | None = None
        self.loss_id: int | None = None  # what forward() returned: read by whoever reads the loss
        self.functions: dict[int, tuple[list, str | None]] = {}  # tape index → (record_func arrays, call site)

    def recorded_func(self, index: int, arrays) -> None:
        """A ``tape.record_func(backward, arrays)`` call: Warp keeps the arrays only in a tape-wide dict, so they
        are kept here per entry, with the first call site outside Warp."""
        import inspect

        frame = inspect.currentframe().f_back
        while frame is not None and (
            frame.f_globals.get("__name__", "").split(".")[0] == "warp" or frame.f_globals.get("__name__") == __name__
        ):
            frame = frame.f_back
        where = f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame else None
        self.functions[index] = (list(arrays), where)

    def before(self, kernel, dim, inputs, outputs, options) -> None:
        import warp as wp

        from gradcheck.probes.replay_probe import fingerprint

        launch = _Launch(len(self.launches), kernel, dim, inputs, outputs, options)
        launch.reads = frozenset(id(v) for v in inputs if _is_plain_array(v))
        launch.writes = frozenset(id(v) for v in outputs if _is_plain_array(v))
        launch.where = options.get("where")  # the caller of wp.launch
        if self.over_budget_at is None:
            for value in list(inputs) + list(outputs):
                if not _is_plain_array(value):
                    continue
                fp = fingerprint(value)
                known = self.latest.get(id(value))
                if known is None or known[0] != fp:
                    size = int(getattr(value, "capacity", 0) or 0)
                    if self.used + size > self.budget:
                        self.over_budget_at = launch.index
                        launch.pre = {}
                        break
                    self.used += size
                    known = (fp, wp.clone(value, requires_grad=False))
                    self.latest[id(value)] = known
                launch.pre[id(value)] = known[1]
        self.launches.append(launch)


def record_forward(scenario, budget: int = COPY_BUDGET_BYTES):
    """Run ``scenario.forward()`` under a tape with launches intercepted; returns (recorder, tape, loss). The
    params decide what is tested (see ``gradient_path``): pass them to check_launches."""
    import warp as wp

    from gradcheck.probes.warp_compat import intercepted_launches

    recorder = LaunchRecorder(budget)
    tape = wp.Tape()
    record_func = tape.record_func

    def recording_func(backward, arrays):
        recorder.recorded_func(len(tape.launches), arrays)
        return record_func(backward, arrays)

    tape.record_func = recording_func  # on this instance only: wp.copy and user code find it as runtime.tape
    with intercepted_launches(recorder.before), tape:
        loss = scenario.forward()
    recorder.loss_id = id(loss)
    return recorder, tape, loss


def check_launches(
    recorder: LaunchRecorder, params, options: FDOptions, seed: int = 0, tangents=None
) -> list[LaunchVerdict]:
    """The dot-product and accumulation tests for every recorded launch, on the inputs that depend on ``params``
    and the outputs that reach the loss. ``tangents`` (record_tangents): the
    direction each launch's inputs move in when the params do, used instead of a random one."""
    import numpy as np

    rng = np.random.default_rng(seed)
    verdicts = []
    launches = recorder.launches
    read_after = _read_after(launches, recorder.loss_id)
    path = gradient_path(launches, params, recorder.loss_id)
    for launch in launches:
        verdict = _test_unit([launch], options, rng, read_after, path, tangents)
        if verdict.status in ("mismatch", "assigns"):
            # a split adjoint: the launch's derivative is computed by its consumers' adjoints (Featherstone's
            # Cholesky), or it computes its producers' (the solve's adjoint writes the matrix's adjoint, and
            # for a symmetric matrix read in one triangle only its producer's adjoint completes it).
            for unit in _units_around(launches, launch):
                joint = _test_unit(unit, options, rng, read_after, path, tangents)
                if joint.status == "ok":
                    partners = [entry for entry in unit if entry is not launch]
                    verdict = replace(
                        verdict,
                        status="split",
                        note="its adjoint is split with "
                        + ", ".join(f"#{c.index} {c.kernel.key}" for c in partners)
                        + f": tested together they agree (rel {joint.rel_error:.2g})",
                    )
                    break
        if verdict.status in ("mismatch", "assigns"):
            from gradcheck.probes.kernel_patterns import suspects

            found = tuple((s.bug, s.where, s.what) for s in suspects(launch.kernel))
            verdict = replace(verdict, suspects=found)
        verdicts.append(verdict)
    return verdicts


def record_tangents(
    scenario, params: dict, restore, recorder: LaunchRecorder, seed: int = 0, step: float = 1e-3, direction=None
):
    """launch index → {id(array): d(values before the launch) / dt} along a param direction (``direction``: the one
    a finite-difference probe disagreed along, key → step; else random), from two more
    recorded forwards at params +- step (relative to each param's RMS), or None when those forwards launched
    something else (a data-dependent launch sequence).

    Why not a random direction per launch: launches are only ever evaluated on inputs the program can produce.
    Newton's mass matrix is symmetric, its Cholesky reads one triangle and the solve's adjoint writes the
    full-matrix convention: correct for every symmetric perturbation, wrong for a random one. The program's own
    tangent keeps every such structure."""
    import numpy as np

    from gradcheck.probes.warp_compat import is_float_array

    rng = np.random.default_rng(seed)
    params = {key: arr for key, arr in params.items() if is_float_array(arr)}
    base_values = {key: arr.numpy().astype(np.float64) for key, arr in params.items()}
    if direction:  # the param direction fd-mismatch disagreed along: its error is the sum of the launches'
        direction = {
            key: np.asarray(direction[key], dtype=np.float64).reshape(v.shape) if key in direction else 0.0 * v
            for key, v in base_values.items()
        }
        size = math.sqrt(sum(float(np.sum(d * d)) for d in direction.values())) or 1.0
        scale = math.sqrt(sum(param_scale(v) ** 2 for v in base_values.values()))
        direction = {key: d * scale / size for key, d in direction.items()}
    else:
        direction = {key: param_scale(v) * rng.standard_normal(v.shape) for key, v in base_values.items()}
    runs = []
    for sign in (1.0, -1.0):
        restore()
        for key, arr in params.items():
            arr.assign((base_values[key] + sign * step * direction[key]).astype(arr.numpy().dtype))
        run, _tape, _loss = record_forward(scenario, recorder.budget)
        runs.append(run)
    restore()
    plus, minus = runs
    kernels = [launch.kernel for launch in recorder.launches]
    if any([launch.kernel for launch in run.launches] != kernels for run in runs):
        return None
    tangents = {}
    for base, up, down in zip(recorder.launches, plus.launches, minus.launches):
        # arguments match by position: the same launch in each run passes the same arrays
        entry = {}
        for value, v_up, v_down in zip(base.inputs, up.inputs, down.inputs):
            if _is_plain_array(value) and is_float_array(value) and id(v_up) in up.pre and id(v_down) in down.pre:
                a = up.pre[id(v_up)].numpy().astype(np.float64)
                b = down.pre[id(v_down)].numpy().astype(np.float64)
                if a.shape == b.shape:
                    entry[id(value)] = (a - b) / (2 * step)
        tangents[base.index] = entry
    return tangents


def check_recorded_functions(tape, functions=None, names=None, seed: int = 0) -> list[LaunchVerdict]:
    """Tape entries that are not kernel launches (``record_func``). None has a forward to replay, so what is
    tested is what every adjoint owes the gradients it is given: to add to them.

    The adjoint ``wp.copy`` records (``clone``, ``assign``): prefill the source gradient with r, the destination's
    with w, run the recorded backward, expect r + w (Warp up to 1.16 assigned w, dropping every other
    contribution to the source). Any other entry whose arrays are known (``functions``: tape index → (arrays,
    call site), from record_forward): see ``_overwritten``. Entries whose arrays are unknown are listed as not
    checked. ``names``: id(array) → the name findings use (the params'). Every gradient touched is put back
    afterwards."""
    import numpy as np
    import warp as wp

    from gradcheck.probes.warp_compat import first_use_label, is_float_array, recorded_functions, tape_launches

    rng = np.random.default_rng(seed)
    functions, names = functions or {}, names or {}
    launches = tape_launches(tape)

    def label_of(array) -> str:
        return (names.get(id(array)) or first_use_label(launches, array) or "an array of its") + ".grad"

    verdicts = []
    for index, backward, copy in recorded_functions(launches):
        if copy is None:
            arrays, where = functions.get(index, (None, None))
            qualname = getattr(backward, "__qualname__", type(backward).__name__)
            name = f"record_func {qualname.replace('.<locals>', '')}"
            if arrays is None:
                verdicts.append(LaunchVerdict(index, name, None, "not-checked", note="its arrays are not known"))
            else:
                verdicts.append(_overwritten(index, name, where, backward, arrays, rng, label_of))
            continue
        dest, src = copy
        label = "wp.copy (recorded on the tape)"
        if (
            dest.grad is None
            or src.grad is None
            or not (is_float_array(dest) and is_float_array(src))
            or dest.grad.size != src.grad.size
        ):
            verdicts.append(LaunchVerdict(index, label, None, "not-checked", note="not a whole float copy"))
            continue
        saved = (wp.clone(dest.grad), wp.clone(src.grad))
        try:
            shape = src.grad.numpy().shape
            r = rng.standard_normal(shape).astype(src.grad.numpy().dtype)
            w = rng.standard_normal(dest.grad.numpy().shape).astype(dest.grad.numpy().dtype)
            src.grad.assign(r)
            dest.grad.assign(w)
            backward()
            wp.synchronize_device(src.device)
            got = src.grad.numpy().astype(np.float64).reshape(-1)
        finally:
            wp.copy(dest.grad, saved[0])
            wp.copy(src.grad, saved[1])
        expected = r.astype(np.float64).reshape(-1) + w.astype(np.float64).reshape(-1)
        error = float(np.max(np.abs(got - expected)) / (np.max(np.abs(expected)) or 1.0))
        if error > 1e-5:
            assigned = np.allclose(got, w.astype(np.float64).reshape(-1), rtol=1e-6, atol=1e-7)
            note = (
                "its adjoint overwrites the source's gradient instead of adding to it"
                if assigned
                else "its adjoint does not add the destination's gradient to the source's"
            )
            verdicts.append(LaunchVerdict(index, label, None, "assigns", error, note=note))
        else:
            verdicts.append(LaunchVerdict(index, label, None, "ok", error))
    return verdicts


def _overwritten(index: int, name: str, where, backward, arrays, rng, label_of) -> LaunchVerdict:
    """Does a recorded backward overwrite a gradient it should add to? Without its forward, what a backward
    computes cannot be checked, but how it treats the gradients it is given can. Prefill every array's gradient
    with random values and run it; then, one array at a time, change only that array's prefill and run it again.
    - Other arrays' results move: the backward reads this gradient (an output of the op): not judged.
    - Nothing else moves and this array's own result does not move either, yet the backward left a nonzero
      value there: it discarded what was accumulated before and wrote its own — an adjoint that assigns
      (``x_grad[i] = ...`` for ``+=``). An op that overwrites its input with a constant may legitimately zero
      the gradient; that writes zeros and is not flagged.
    Costs one more backward call per array."""
    import numpy as np
    import warp as wp

    from gradcheck.probes.warp_compat import is_float_array

    unique = {}
    for a in arrays:
        if getattr(a, "grad", None) is not None and is_float_array(a) and id(a.grad) not in unique:
            unique[id(a.grad)] = a
    grads = [a.grad for a in unique.values()]
    if not grads:
        return LaunchVerdict(index, name, where, "not-checked", note="no float gradients among its arrays")
    saved = [wp.clone(g) for g in grads]

    def trial(fills):
        for g, fill in zip(grads, fills):
            g.assign(fill)
        backward()
        for g in grads:
            wp.synchronize_device(g.device)
        return [g.numpy().astype(np.float64).copy() for g in grads]

    try:
        base = [rng.standard_normal(g.numpy().shape).astype(g.numpy().dtype) for g in grads]
        first = trial(base)
        worst = None  # (share of elements overwritten, position)
        for i in range(len(grads)):
            fills = list(base)
            fills[i] = rng.standard_normal(base[i].shape).astype(base[i].dtype)
            again = trial(fills)
            if any(not np.allclose(again[j], first[j], rtol=1e-5, atol=1e-7) for j in range(len(grads)) if j != i):
                continue  # this gradient is read: an output of the op
            moved = np.abs(fills[i].astype(np.float64) - base[i].astype(np.float64))
            kept = np.abs(again[i] - first[i]) > 1e-3 * moved
            dropped = (~kept) & (first[i] != 0.0) & (moved > 0)
            share = float(np.count_nonzero(dropped)) / max(dropped.size, 1)
            if share > 0 and (worst is None or share > worst[0]):
                worst = (share, i)
    except Exception as exc:  # noqa: BLE001 - a backward that cannot run twice is not judged
        return LaunchVerdict(index, name, where, "not-checked", note=f"its backward raised {type(exc).__name__}")
    finally:
        for g, copy in zip(grads, saved):
            wp.copy(g, copy)
    if worst is None:
        return LaunchVerdict(index, name, where, "ok")
    share, i = worst
    label = label_of(list(unique.values())[i])
    return LaunchVerdict(
        index,
        name,
        where,
        "assigns",
        share,
        note=f"its backward overwrites the gradient of {label} instead of adding to it "
        f"({share:.0%} of the elements: what was accumulated there before is lost)",
    )


def gradient_path(launches: list[_Launch], params, loss_id: int | None) -> tuple[set[int], set[int]]:
    """(ids of arrays that depend on the params, ids of arrays the loss depends on), through the launches.

    Only derivatives along this path reach a param's gradient. Others are not the program's business: Newton's
    Featherstone Cholesky adjoint is a no-op, so the derivative by the armature it adds to the diagonal is
    dropped, but no gradient gradcheck is asked about flows through it."""
    depends = {id(p) for p in params}
    for launch in launches:
        if any(id(v) in depends for v in launch.inputs):
            depends |= launch.writes
    feeds = {loss_id} if loss_id is not None else set()
    for launch in reversed(launches):
        if any(id(v) in feeds for v in launch.outputs):
            feeds |= launch.reads
    return depends, feeds


def _read_after(launches: list[_Launch], loss_id: int | None):
    """read_after(key, index): is the value the array holds after launch ``index`` read by a later launch before
    anything overwrites it (or is it the loss)? Only those outputs carry adjoints in the program: a scratch output
    no later launch reads (Featherstone's ``tmp``) gets none, and a custom adjoint may rightly ignore it. By value,
    not by array: stock Featherstone reuses one ``L`` for every step."""
    import bisect

    events: dict[int, list[tuple[int, bool]]] = {}  # key → [(launch index, is a read)], in order
    for launch in launches:
        for key in launch.reads:
            events.setdefault(key, []).append((launch.index, True))
        for key in launch.writes - launch.reads:
            events.setdefault(key, []).append((launch.index, False))

    def read_after(key: int, index: int) -> bool:
        if key == loss_id:
            return True
        history = events.get(key, [])
        position = bisect.bisect_right(history, (index, True))
        return position < len(history) and history[position][1]

    return read_after


def _units_around(launches: list[_Launch], launch: _Launch):
    """Candidate units for a split adjoint, smallest first: the launch with each single consumer, with each single
    producer (Featherstone's solve with its Cholesky, not with the torque kernel that also feeds it), then with all
    consumers, all producers, two generations of producers, both sides; each at most MAX_UNIT launches, each tried
    once, MAX_UNITS at most."""
    seen = set()
    after = _consumers(launches, [launch])
    before = _producers(launches, [launch])
    before2 = _producers(launches, [*before, launch]) if before else []
    candidates = [[launch, c] for c in after] + [[p, launch] for p in reversed(before)]
    candidates += [[launch, *after], [*before, launch], [*before2, *before, launch], [*before, launch, *after]]
    tried = 0
    for unit in candidates:
        unit = sorted({id(u): u for u in unit}.values(), key=lambda entry: entry.index)
        key = tuple(u.index for u in unit)
        if len(unit) > 1 and len(unit) <= MAX_UNIT and key not in seen and tried < MAX_UNITS:
            seen.add(key)
            tried += 1
            yield unit


def _consumers(launches: list[_Launch], unit: list[_Launch]) -> list[_Launch]:
    """The next launches after the unit that read a value the unit wrote (in outputs), before another launch
    overwrites it: the array may be reused for the next step's value."""
    live = set().union(*(entry.writes for entry in unit))
    found = []
    for later in launches[unit[-1].index + 1 :]:
        if not live:
            break
        if not later.reads.isdisjoint(live):
            found.append(later)
            if len(found) >= MAX_CONSUMERS:
                break
        live -= later.writes
    return found


def _producers(launches: list[_Launch], unit: list[_Launch]) -> list[_Launch]:
    """The latest launches before the unit that wrote (in outputs) an array the unit reads and does not write."""
    written = frozenset().union(*(entry.writes for entry in unit))
    reads = set().union(*(entry.reads for entry in unit)) - written
    found = []
    for earlier in reversed(launches[: unit[0].index]):
        wrote = earlier.writes & reads
        if wrote:
            found.insert(0, earlier)
            reads -= wrote
            if len(found) >= MAX_CONSUMERS or not reads:
                break
    return found


_ARRAY_CLASS: list = []


def _is_plain_array(value) -> bool:
    if not _ARRAY_CLASS:
        from gradcheck.probes.warp_compat import array_class

        _ARRAY_CLASS.append(array_class())
    return isinstance(value, _ARRAY_CLASS[0]) and bool(value.ptr)


def _label(unit: list[_Launch]) -> tuple[int, str, str | None]:
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


def _tangent(unit: list[_Launch], keys: list[int], tangents) -> dict | None:
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


def _test_unit(unit: list[_Launch], options: FDOptions, rng, read_after, path, tangents=None) -> LaunchVerdict:
    import numpy as np
    import warp as wp

    from gradcheck.probes.finite_diff import F32_EPS, Judge
    from gradcheck.probes.warp_compat import backward_disabled, is_float_array, is_struct_instance

    for launch in unit:
        if not launch.pre and any(_is_plain_array(v) for v in launch.inputs + launch.outputs):
            return _not_checked(unit, "over the memory budget for copies of forward values")
        if any(is_struct_instance(v) for v in launch.inputs + launch.outputs):
            return _not_checked(unit, "takes a struct argument (not replayed yet)")
        if backward_disabled(launch.kernel):
            return _not_checked(unit, "built with enable_backward=False")

    arrays: dict[int, object] = {}
    for launch in unit:
        for v in launch.inputs + launch.outputs:
            if _is_plain_array(v):
                arrays.setdefault(id(v), v)
    outputs = set().union(*(launch.writes for launch in unit))
    first_pre = {}
    for launch in unit:
        for key, copy in launch.pre.items():
            first_pre.setdefault(key, copy)

    post: dict[int, dict] = {}  # launch index → its arrays as it left them (the base run)
    buffers = {key: wp.clone(first_pre[key], requires_grad=False) for key in arrays}  # reused by every run

    def run_forward(perturb: dict | None = None, keep: bool = False) -> dict:
        perturb = perturb or {}
        work = buffers
        for key in arrays:
            wp.copy(work[key], first_pre[key])
        produced: set[int] = set()  # arrays an earlier launch of the unit wrote: those flow on
        for position, launch in enumerate(unit):
            # everything else as this launch found it in the forward (launches outside the unit may have run in
            # between), with the perturbation of the unit's inputs applied again
            for key, copy in launch.pre.items():
                if key in produced or (position == 0 and key not in perturb):
                    continue
                if key in perturb:
                    values = copy.numpy().astype(np.float64) + perturb[key]
                    work[key].assign(values.astype(copy.numpy().dtype))
                else:
                    wp.copy(work[key], copy)
            _forward(launch, work)
            produced |= launch.writes
            if keep:
                post[launch.index] = {key: wp.clone(work[key], requires_grad=False) for key in launch.writes}
        return work

    def _forward(launch, work):
        wp.launch(
            launch.kernel,
            launch.dim,
            inputs=[work.get(id(v), v) if _is_plain_array(v) else v for v in launch.inputs],
            outputs=[work.get(id(v), v) if _is_plain_array(v) else v for v in launch.outputs],
            device=launch.options["device"],
            **_launch_options(launch),
        )

    base = {key: wp.clone(value, requires_grad=False) for key, value in run_forward(keep=True).items()}
    # bytes, not values: writing -0.0 over 0.0 is a write (Newton's eval_rigid_tau stores -f into its input
    # body_f_ext), and Warp's adjoint treats a written input's gradient as an output's
    written = {key for key in arrays if _raw(base[key]) != _raw(first_pre[key])} | outputs
    read = [id(v) for launch in unit for v in launch.inputs if _is_plain_array(v)]
    # as the tape's backward sees them: only arrays that require grad have adjoints (kernels test for them:
    # Featherstone's solve adjoint returns early without one), so only those are perturbed and weighed
    grads = {key for key, a in arrays.items() if getattr(a, "requires_grad", False)}
    depends, feeds = path
    in_place = [
        key
        for key in written
        if key in read and key not in outputs and key in grads and (key in depends or key in feeds)
    ]
    if in_place:
        return _not_checked(unit, "updates an input array in place (Warp's adjoint does not support that)")
    last = unit[-1].index
    finals = [key for key in written if read_after(key, last) and is_float_array(arrays[key])]
    finals = [key for key in finals if key in grads and key in feeds]
    perturbable = [
        key
        for key in dict.fromkeys(read)
        if key not in written and key in grads and key in depends and is_float_array(arrays[key])
    ]
    if not finals or not perturbable:
        return _not_checked(unit, "no float input to perturb or float output to weigh")

    weights = {key: rng.standard_normal(base[key].numpy().shape) for key in finals}
    x0 = {key: first_pre[key].numpy().astype(np.float64) for key in perturbable}
    scale = {key: param_scale(x0[key]) for key in perturbable}
    raw = _tangent(unit, perturbable, tangents)
    if raw is None:  # no program tangent reaches these inputs: a random direction, scaled per array
        raw = {key: scale[key] * rng.standard_normal(x0[key].shape) for key in perturbable}
    norm = math.sqrt(sum(float(np.sum(r * r)) for r in raw.values())) or 1.0
    size = math.sqrt(sum(scale[key] ** 2 for key in perturbable))
    direction = {key: size * raw[key] / norm for key in perturbable}

    def weighted(work: dict) -> float:
        return float(sum(np.sum(weights[k] * work[k].numpy().astype(np.float64)) for k in finals))

    magnitude = float(sum(np.sum(np.abs(weights[k] * base[k].numpy().astype(np.float64))) for k in finals))

    replay = {
        launch.index: {
            key: wp.clone(copy, requires_grad=False) for key, copy in {**launch.pre, **post[launch.index]}.items()
        }
        for launch in unit
    }

    def adjoint(prefill: dict) -> dict:
        adj = {key: wp.zeros_like(first_pre[key], requires_grad=False) for key in arrays if key in grads}
        for key in finals:
            adj[key].assign(weights[key].astype(first_pre[key].numpy().dtype))
        for key, values in prefill.items():
            adj[key].assign(values.astype(first_pre[key].numpy().dtype))
        for launch in reversed(unit):
            # as the tape's backward replays it: inputs as the launch read them, outputs as it left them
            own = replay[launch.index]
            for key, copy in launch.pre.items():
                wp.copy(own[key], copy)
            for key, copy in post[launch.index].items():
                wp.copy(own[key], copy)
            wp.launch(
                launch.kernel,
                launch.dim,
                inputs=[own.get(id(v), v) if _is_plain_array(v) else v for v in launch.inputs],
                outputs=[own.get(id(v), v) if _is_plain_array(v) else v for v in launch.outputs],
                adj_inputs=[adj.get(id(v)) if _is_plain_array(v) else _zero_like(v) for v in launch.inputs],
                adj_outputs=[adj.get(id(v)) if _is_plain_array(v) else _zero_like(v) for v in launch.outputs],
                adjoint=True,
                device=launch.options["device"],
                **_launch_options(launch),
            )
        return {key: adj[key].numpy().astype(np.float64) for key in perturbable}

    clean = adjoint({})
    prefill = {key: rng.standard_normal(x0[key].shape) for key in perturbable}
    filled = adjoint(prefill)
    ad = sum(float(np.sum(clean[k] * direction[k])) for k in perturbable)

    rollouts = _UnitRollouts(lambda delta: weighted(run_forward(delta)))
    judge = Judge(rollouts, weighted(base), options, sigma=F32_EPS * max(magnitude, 1e-30))
    probe = judge.probe("unit", ad, direction, 0.0)

    index, key, where = _label(unit)
    # the adjoint must add to what the input gradients held: filled == prefill + clean
    worst = 0.0
    for k in perturbable:
        expected = prefill[k] + clean[k]
        tolerance = 1e-4 * (np.abs(prefill[k]) + np.abs(clean[k])) + 1e-6
        worst = max(worst, float(np.max(np.abs(filled[k] - expected) / tolerance)) if expected.size else 0.0)
    if worst > 1.0 and any(np.any(clean[k] != 0) for k in perturbable):
        return LaunchVerdict(
            index,
            key,
            where,
            "assigns",
            probe.rel_error,
            ad,
            probe.fd,
            rollouts.count,
            note="its adjoint overwrites the input gradients instead of adding to them",
        )
    if not probe.converged:
        return LaunchVerdict(index, key, where, "no-verdict", probe.rel_error, ad, probe.fd, rollouts.count)
    status = "mismatch" if probe.rel_error >= options.warn else "ok"
    return LaunchVerdict(index, key, where, status, probe.rel_error, ad, probe.fd, rollouts.count)


def _launch_options(launch: _Launch) -> dict:
    """The launch's own device, max_blocks and block_dim (block_dim only where this Warp has it), untaped."""
    from gradcheck.probes.warp_compat import launch_accepts

    options = {"max_blocks": launch.options["max_blocks"], "record_tape": False}
    if launch.options.get("block_dim") and launch_accepts("block_dim"):
        options["block_dim"] = launch.options["block_dim"]
    return options


def _raw(array) -> int:
    import zlib

    import numpy as np

    values = np.ascontiguousarray(array.numpy())
    return zlib.crc32(values.view(np.uint8).reshape(-1)) if values.size else 0


def _zero_like(value):
    """The adjoint of a non-array argument: zero of its type, or None for what has none."""
    try:
        return type(value)(0) if not isinstance(value, bool) else False
    except Exception:  # noqa: BLE001 - vectors, structs: Warp accepts None for an unused adjoint
        return None
