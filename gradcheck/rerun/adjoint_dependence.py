"""Does a launch's adjoint depend on the values of one of its inputs? Asked of a write-after-read before it is
called a hazard.

A later launch rewrote an array an earlier launch read, so the earlier launch's adjoint runs at the rewritten
values. That changes the gradient only if the adjoint *uses* those values: ``y = x * x`` or ``y = x * w`` do
(``2 x`` and ``x`` appear in the adjoints); ``y = 2 x``, a copy, an FFT stage, a sum do not (their adjoints are
linear maps of the output adjoints alone). Warp's own scratch-reusing programs (the Navier-Stokes perturbation
example's FFT buffers, test_array_subclass doubling an array in place twice) are correct for that reason.

The test needs no record of the old values: the launch's adjoint is run twice on private copies of its arguments,
with the same random output adjoints, once at the array's current values and once at random other values. Bitwise
equal adjoints of every argument: the adjoint does not read that array (a linear or unused input). Anything the
test cannot run on private copies (a struct argument, whose arrays are the program's; a
kernel without a backward; a failure) gives None: not judged, the hazard stands. As the tape runs it, an array
without ``.grad`` gets no adjoint (a constant coefficient's adjoint, which does use the values, is dropped).
"""

from __future__ import annotations

_cache: dict[tuple, bool | None] = {}  # (id(kernel), argument, which have .grad) → the answer (kernels are kept)


def adjoint_reads(call, label: str) -> bool | None:
    """True when the adjoint of the launch ``call`` depends on the values of its argument ``label``; False when it
    provably does not; None when that could not be tested."""
    try:  # which arguments have gradients is part of the question: the tape drops the adjoints of those without
        key = (id(call.kernel), label, tuple(getattr(v, "grad", None) is not None for _, v in call.arguments()))
    except Exception:  # noqa: BLE001 - not a launch of the program's (a captured forward's replay record)
        return None
    if key not in _cache:
        try:
            _cache[key] = _test(call, label)
        except Exception:  # noqa: BLE001 - an untestable launch keeps its hazard
            _cache[key] = None
    return _cache[key]


def _test(call, label: str) -> bool | None:
    import numpy as np

    from gradcheck.tape.launch_access import kernel_roles
    from gradcheck.warp_compat import backward_disabled, is_float_array

    arguments = call.arguments()
    labels = [name for name, _ in arguments]
    if label not in labels or backward_disabled(call.kernel):
        return None
    target = dict(arguments)[label]
    if not is_float_array(target) or not target.is_contiguous:
        return None
    if any(_unsafe(value) for _, value in arguments):
        return None
    rng = np.random.default_rng(7)
    # seeded: what the code may write (``writes``): the adjoint reads a seed only where the forward wrote
    roles = kernel_roles(call.kernel, len(arguments), inputs=len(arguments))  # only the code's answer is asked
    written = {role.name for role in roles if role.writes}
    seeds = {name: random_like(value, rng) for name, value in arguments if _plain(value) and name in written}
    # an array the launch reads and writes (a[i] = 2 a[i]) is judged the same way: copies, both runs
    other = random_like(target, rng)
    first = private_adjoint(call, arguments, seeds)
    second = private_adjoint(call, arguments, seeds, label, other)
    return any(not np.array_equal(first[name], second[name]) for name in first)


def _plain(value) -> bool:
    from gradcheck.warp_compat import array_class

    return issubclass(type(value), array_class())  # subclasses too (Warp's TaggedArray); not a __class__ pretender


def _unsafe(value) -> bool:
    """An argument the test cannot copy: anything holding arrays of the program's other than a plain array (the
    adjoint re-runs the forward's stores, which would land in the program's memory)."""
    from gradcheck.warp_compat import is_struct_instance

    if _plain(value):
        return not value.is_contiguous
    return is_struct_instance(value) or hasattr(value, "ptr") or hasattr(value, "__cuda_array_interface__")


def random_like(array, rng):

    shape = array.numpy().shape
    return rng.standard_normal(shape).astype(array.numpy().dtype)


def private_adjoint(call, arguments, seeds: dict, replaced: str | None = None, values=None) -> dict:
    """argument name → its adjoint (numpy) after one adjoint launch of ``call`` on private copies of its plain array
    arguments, the adjoints of ``seeds`` (name → values) seeded, the rest zero; ``replaced`` runs at ``values``.
    Arguments without ``.grad`` get no adjoint, as the tape runs it. Also gradcheck.diagnose.chain_break's test of
    whether a launch passes a gradient at all."""
    import numpy as np
    import warp as wp

    from gradcheck.rerun.launch_values import adjoint_of

    work, adjoints, kept = [], [], []
    for name, value in arguments:
        if not _plain(value):
            work.append(value)
            adjoints.append(adjoint_of(value, {}))
            continue
        copy = wp.clone(value, requires_grad=False)
        if name == replaced:
            copy.assign(values)
        work.append(copy)
        if getattr(value, "grad", None) is None:  # as the tape runs it: no adjoint for an array without .grad
            adjoints.append(None)
            continue
        adjoint = wp.zeros_like(value, requires_grad=False)
        if name in seeds:
            adjoint.assign(seeds[name])
        adjoints.append(adjoint)
        kept.append((name, adjoint))
    options = {k: v for k, v in call.options().items() if k in ("device", "max_blocks") and v is not None}
    if call.get("block_dim"):
        options["block_dim"] = call.get("block_dim")
    wp.launch(
        call.kernel, call.get("dim"), inputs=work, adj_inputs=adjoints, adjoint=True, record_tape=False, **options
    )
    return {name: np.array(a.numpy(), copy=True) for name, a in kept}
