"""Blame: which launch's adjoint is wrong. A dot-product test per launch, with the values it ran on.

fd-mismatch says the gradient of ``x[7][0]`` is wrong; it cannot say which of 1,601 launches did it. Each
launch is a function from the arrays it reads to the arrays it writes, and its adjoint must be that
function's transpose Jacobian: for random output weights w and a random input direction u,

    <w, (F(x + h u) - F(x - h u)) / 2h>   must equal   <J^T w, u>   (from the launch's adjoint),

and the adjoint must *add* J^T w to the input gradients it is given (Warp accumulates adjoints; an adjoint
that assigns drops every other contribution). Both are checked on the values the launch really ran on:
Warp records a launch only after it ran, and later launches overwrite what it read, so the launches come from a
recording (gradcheck.rerun.launch_record) that copied each array argument before the launch, whenever it changed
since its last copy (a memory budget caps the copies; launches past it are listed as not checked). The same tests
serve ``run``'s blame probe, ``exec --blame`` and ``exec``'s default adjoint test (``check_selected``).

Everything runs on private copies: the program's arrays are never written. The finite differences use the
noise-aware judge of gradcheck.rerun.finite_diff (disagreements need three agreeing steps).

Split adjoints are not bugs: Newton's Featherstone computes the Cholesky factor in one launch and solves
with it in the next; the factorisation's adjoint is a no-op and the solve's adjoint covers both. A launch
that fails alone is tested again together with the launches that read what it wrote, as one unit: if the
unit passes, its adjoint is split across them.
"""

from __future__ import annotations

from dataclasses import replace

from gradcheck.model.options import FDOptions
from gradcheck.model.trace import LaunchVerdict
from gradcheck.rerun.launch_record import COPY_BUDGET_BYTES, Launch, LaunchRecorder, record_forward, record_tangents
from gradcheck.rerun.unit_replay import BufferPool, test_unit

__all__ = [
    "COPY_BUDGET_BYTES",
    "check_launches",
    "check_selected",
    "check_recorded_functions",
    "record_forward",
    "record_tangents",
]
MAX_CONSUMERS = 4  # launches joined at a time to a failing one to test a split adjoint
MAX_UNIT = 6  # launches in one unit at most
MAX_UNITS = 8  # units tried around one failing launch


def check_launches(
    recorder: LaunchRecorder, params, options: FDOptions, seed: int = 0, tangents=None
) -> list[LaunchVerdict]:
    """The dot-product and accumulation tests for every recorded launch, on the inputs that depend on ``params``
    and the outputs that reach the loss. ``tangents`` (record_tangents): the
    direction each launch's inputs move in when the params do, used instead of a random one."""
    from gradcheck.rerun.launch_record import paused_gc

    with paused_gc():
        return _check_launches(recorder, params, options, seed, tangents)


def _check_launches(recorder: LaunchRecorder, params, options: FDOptions, seed: int, tangents) -> list[LaunchVerdict]:
    import numpy as np

    rng = np.random.default_rng(seed)
    launches = recorder.launches
    read_after = _read_after(launches, recorder.loss_id, recorder.seeds, recorder.copies)
    path = gradient_path(launches, params, recorder.loss_id, recorder.seeds, recorder.copies)
    pool = BufferPool()
    return [_verdict(launches, launch, options, rng, read_after, path, tangents, pool, True) for launch in launches]


def check_selected(
    recorder: LaunchRecorder, params, options: FDOptions, selected: list[int], units: bool, seed: int = 0
) -> list[LaunchVerdict]:
    """The tests of the launches at ``selected`` (tape positions) only: what the default adjoint test of
    ``gradcheck exec`` runs, the first launch of each kernel. ``units``: the recording holds copies of every
    launch, so a launch that fails alone is tested with its neighbours (a split adjoint); without them such a
    launch keeps its lone verdict, which the caller must not take for a measured error. Each input is tested alone
    too (a few launches: the cost --blame cannot pay on every launch)."""
    import numpy as np

    from gradcheck.rerun.launch_record import paused_gc

    rng = np.random.default_rng(seed)
    launches = recorder.launches
    read_after = _read_after(launches, recorder.loss_id, recorder.seeds, recorder.copies)
    path = gradient_path(launches, params, recorder.loss_id, recorder.seeds, recorder.copies)
    pool = BufferPool()
    with paused_gc():
        return [
            _verdict(launches, launches[i], options, rng, read_after, path, None, pool, units, per_input=True)
            for i in selected
        ]


def _verdict(
    launches, launch, options, rng, read_after, path, tangents, pool, units: bool, per_input: bool = False
) -> LaunchVerdict:
    """One launch's verdict: alone, then (``units``) with the launches around it when it fails alone; the
    constructs its kernel holds that Warp mishandles named when it fails or cannot be settled."""
    verdict = test_unit([launch], options, rng, read_after, path, tangents, pool, per_input)
    if units and verdict.status in ("mismatch", "assigns"):
        # a split adjoint: the launch's derivative is computed by its consumers' adjoints (Featherstone's
        # Cholesky), or it computes its producers' (the solve's adjoint writes the matrix's adjoint, and
        # for a symmetric matrix read in one triangle only its producer's adjoint completes it).
        closest = None  # the unit that came closest to agreeing, when none agreed
        for unit in _candidate_units(launches, launch):
            joint = test_unit(unit, options, rng, read_after, path, tangents, pool, per_input)
            if joint.status == "mismatch" and (closest is None or joint.rel_error < closest[0].rel_error):
                closest = (joint, unit)
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
        else:
            if tangents is None and closest is not None:  # exec: random directions; the program's own, from the
                along = _along_program_tangent(launches, launch, options, rng, read_after, path, pool, per_input)
                if along is not None and along.status not in ("mismatch", "assigns"):
                    return along  # right, or split, along what the program does: the random direction left its domain
            verdict = _split_not_ruled_out(verdict, closest, options)
    if verdict.status in ("mismatch", "assigns", "no-verdict"):  # unsettled ones too: a suspect to name
        from gradcheck.source.custom_adjoints import custom_adjoints
        from gradcheck.source.kernel_patterns import suspects

        found = tuple((s.bug, s.where, s.what, s.rewrite) for s in suspects(launch.kernel))
        verdict = replace(verdict, suspects=found, custom_adjoint=custom_adjoints(launch.kernel))
        verdict = _flat_in_float32(verdict)
    return verdict


FLAT = 0.05  # |FD| below this share of |adjoint|: the launch is flat where its adjoint is not


def _flat_in_float32(verdict: LaunchVerdict) -> LaunchVerdict:
    """A launch whose float32 forward is flat where Warp's own adjoint is not: rounding of an intermediate value can
    flatten it (a world offset of 1e6 added to a local 1e-3 and cancelled: the sum rounds to the offset, so central
    differences see nothing of the local value, while the adjoint, exact in real arithmetic, does). A wrong adjoint
    of Warp's shows the other way round (a zero, a factor), so this is no verdict. A hand-written adjoint flat like
    this is a surrogate's shape (adjoint-mismatch's rules)."""
    flat = verdict.status == "mismatch" and abs(verdict.fd) <= FLAT * abs(verdict.ad)
    if not flat or verdict.custom_adjoint:
        return verdict
    note = (
        f"the launch is flat in float32 along the direction (FD {verdict.fd:.3g}) where its adjoint is not "
        f"({verdict.ad:.3g}): rounding of an intermediate value (a large offset cancelled) flattens a function that "
        "is not flat in real arithmetic"
    )
    return replace(verdict, status="no-verdict", note=note)


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

    from gradcheck.warp_compat import first_use_label, is_float_array, recorded_functions, tape_launches

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

    from gradcheck.warp_compat import is_float_array

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


def gradient_path(
    launches: list[Launch], params, loss_id: int | None, seeds=(), copies=()
) -> tuple[set[int], set[int]]:
    """(ids of arrays that depend on the params, ids of arrays the loss depends on), through the launches.

    Only derivatives along this path reach a param's gradient. Others are not the program's business: Newton's
    Featherstone Cholesky adjoint is a no-op, so the derivative by the armature it adds to the diagonal is
    dropped, but no gradient gradcheck is asked about flows through it. By memory, not by array object: a view
    (``reshape``, ``flatten``, a slice) is the array it views. ``seeds``: the arrays a ``backward(grads=...)``
    seeded, each a loss; ``copies``: (launches before it, src, dest) of the tape's copies, edges like launches."""
    group = memory_groups(launches, [*params, *seeds, *(a for _p, *pair in copies for a in pair)])
    steps = _steps(launches, copies, group)
    depends = {group.get(id(p), id(p)) for p in params}
    for reads, writes in steps:
        if not reads.isdisjoint(depends):
            depends |= writes
    feeds = {group.get(k, k) for k in ({loss_id} if loss_id is not None else set()) | {id(s) for s in seeds}}
    for reads, writes in reversed(steps):
        if not writes.isdisjoint(feeds):
            feeds |= reads
    members: dict[int, set[int]] = {}
    for key, root in group.items():
        members.setdefault(root, set()).add(key)

    def ids(roots: set[int]) -> set[int]:
        return set().union(roots, *(members.get(root, ()) for root in roots))

    return ids(depends), ids(feeds)


def _steps(launches: list[Launch], copies, group) -> list[tuple[set[int], set[int]]]:
    """(memory read, memory written) of each launch and copy, in the order they ran."""
    at: dict[int, list] = {}
    for position, src, dest in copies:
        at.setdefault(position, []).append(({group.get(id(src), id(src))}, {group.get(id(dest), id(dest))}))
    steps = list(at.get(0, ()))
    for launch in launches:
        steps.append(({group.get(k, k) for k in launch.reads}, {group.get(k, k) for k in launch.writes}))
        steps.extend(at.get(launch.index + 1, ()))
    return steps


def memory_groups(launches: list[Launch], more=()) -> dict[int, int]:
    """id(array) → one id shared by every array whose memory overlaps its own (a view and what it views), for the
    arrays the launches reach and ``more``."""
    arrays: dict[int, object] = {}
    for launch in launches:
        for array in launch.arrays_in + launch.arrays_out:
            arrays.setdefault(id(array), array)
    for array in more:
        if getattr(array, "ptr", None):
            arrays.setdefault(id(array), array)
    spans = []
    for key, array in arrays.items():
        start = int(array.ptr or 0)
        spans.append((str(getattr(array, "device", "")), start, start + int(getattr(array, "capacity", 0) or 0), key))
    spans.sort()
    group: dict[int, int] = {}
    root, device, end = None, None, -1
    for dev, start, stop, key in spans:
        if root is None or dev != device or start >= end:
            root, device, end = key, dev, stop
        else:
            end = max(end, stop)
        group[key] = root
    return group


def _read_after(launches: list[Launch], loss_id: int | None, seeds=(), copies=()):
    """read_after(key, index): is the value the array holds after launch ``index`` read by a later launch (or copy)
    before anything overwrites it (or is it the loss)? Only those outputs carry adjoints in the program: a scratch
    output no later launch reads (Featherstone's ``tmp``) gets none, and a custom adjoint may rightly ignore it. By
    value, not by array: stock Featherstone reuses one ``L`` for every step. By memory: a view's read is a read."""
    import bisect

    group = memory_groups(launches, [*seeds, *(a for _p, *pair in copies for a in pair)])
    losses = {group.get(k, k) for k in ({loss_id} if loss_id is not None else set()) | {id(s) for s in seeds}}
    events: dict[int, list[tuple[float, bool]]] = {}  # memory → [(when, is a read)], in order
    # a launch that only adds to an array passes on what was there: a read of it, as far as the earlier value goes
    timed = [(launch.index, launch.reads | launch.accumulates, launch.writes) for launch in launches]
    timed += [(position - 0.5, {id(src)}, {id(dest)}) for position, src, dest in copies]  # after launch position-1
    for when, read_ids, write_ids in sorted(timed, key=lambda t: t[0]):
        reads = {group.get(k, k) for k in read_ids}
        for key in reads:
            events.setdefault(key, []).append((when, True))
        for key in {group.get(k, k) for k in write_ids} - reads:
            events.setdefault(key, []).append((when, False))

    def read_after(key: int, index: int) -> bool:
        key = group.get(key, key)
        if key in losses:
            return True
        history = events.get(key, [])
        position = bisect.bisect_right(history, (index, True))
        return position < len(history) and history[position][1]

    return read_after


def _along_program_tangent(launches, launch, options, rng, read_after, path, pool, per_input) -> LaunchVerdict | None:
    """The launch again, alone and then with its neighbours, along the program's own tangent replayed from the
    recording (gradcheck.rerun.replayed_tangents): a random direction may leave the inputs' structure (a symmetric
    matrix), the program's tangent does not. Its verdict only clears the launch (right, or split, along what the
    program does); a disagreement there leaves the random directions' evidence standing (the program's own tangent
    may move a wrong part little: tile_matmul's C). None when no tangent could be replayed."""
    from gradcheck.rerun.replayed_tangents import replayed_tangents

    units = list(_candidate_units(launches, launch))
    wanted = {entry.index for unit in units for entry in unit} | {launch.index}
    depends, _feeds = path
    params = [a for entry in launches for a in entry.arrays_in if id(a) in depends and not _written_before(launches, a)]
    tangents = replayed_tangents(launches, wanted, list({id(a): a for a in params}.values()), rng, pool)
    if tangents is None:
        return None
    return _verdict(launches, launch, options, rng, read_after, path, tangents, pool, True, per_input)


def _written_before(launches, array) -> bool:
    """Whether a launch of the recording writes the array before some launch reads it (then it is no leaf)."""
    key = id(array)
    for entry in launches:
        if key in entry.reads:
            return False
        if key in entry.writes:
            return True
    return False


def _split_not_ruled_out(verdict: LaunchVerdict, closest, options: FDOptions) -> LaunchVerdict:
    """A launch whose adjoint passes nothing alone (exactly 0: a no-op adjoint, Featherstone's Cholesky) that comes
    within the error band once joined with its neighbours: their adjoints carry its derivative (a split adjoint
    tested along a random direction the program would never take: Newton's mass matrix is symmetric, a random
    perturbation of it is not), so no verdict, never an error. An adjoint that computes something wrong (a
    forgotten factor) stays an error: a unit agreeing better only dilutes it with its neighbours' inputs."""
    if closest is None or verdict.status != "mismatch" or verdict.rel_error < options.error or verdict.ad != 0.0:
        return verdict
    joint, unit = closest
    if joint.rel_error >= options.error:
        return verdict
    partners = ", ".join(f"#{c.index} {c.kernel.key}" for c in unit if c.index != verdict.index)
    return replace(
        verdict,
        status="no-verdict",
        note=f"it disagrees alone (rel {verdict.rel_error:.2g}) but only by rel {joint.rel_error:.2g} together with "
        f"{partners}: an adjoint split across them is not ruled out along a random direction",
    )


def has_units(launches: list[Launch], launch: Launch) -> bool:
    """Whether a launch that fails alone has units to be tested in (a split adjoint is possible at all)."""
    return next(_candidate_units(launches, launch), None) is not None


def _candidate_units(launches: list[Launch], launch: Launch):
    """The units around the launch (``_units_around``), then those around each of its direct neighbours that hold it:
    Featherstone's Cholesky (adjoint a no-op) agrees only in the unit that also holds the producers of the solve's
    other input (the torques) and the integrator after it, which is the solve's unit, not one of its own."""
    seen = set()
    neighbours = [*_consumers(launches, [launch]), *reversed(_producers(launches, [launch]))]
    groups = [_units_around(launches, launch)] + [_units_around(launches, n) for n in neighbours]
    for group in groups:
        for unit in group:
            key = tuple(entry.index for entry in unit)
            if launch in unit and key not in seen and len(seen) < 3 * MAX_UNITS:
                seen.add(key)
                yield unit


def _units_around(launches: list[Launch], launch: Launch):
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


def _consumers(launches: list[Launch], unit: list[Launch]) -> list[Launch]:
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


def _producers(launches: list[Launch], unit: list[Launch]) -> list[Launch]:
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
