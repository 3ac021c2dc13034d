"""Every touch of Warp internals in one place.

gradcheck reads things Warp does not document as public API: tape launch entries, kernel
argument labels, struct mirrors, array descriptors. Their layout has moved between releases
(1.19 moved internals to ``warp._src``), so the rest of the package asks this module instead of
reaching into Warp directly.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from itertools import chain


def load_warp():
    """Import and initialise Warp with its module-load chatter off stdout."""
    import warp as wp

    if hasattr(wp, "LOG_WARNING") and hasattr(wp.config, "log_level"):
        wp.config.log_level = wp.LOG_WARNING
    if hasattr(wp.config, "quiet"):
        wp.config.quiet = True
    wp.init()
    return wp


def deterministic_atomics() -> bool:
    """Whether Warp was configured for run-to-run deterministic atomics (1.15+), so CUDA backward is bitwise stable."""
    import warp as wp

    mode = getattr(wp.config, "deterministic", None)
    if isinstance(mode, bool):
        return mode
    name = str(getattr(mode, "name", mode) or "").lower()
    return name in ("run_to_run", "gpu_to_gpu")


def array_class():
    """``wp.array``: the class every Warp array (and view) is an instance of."""
    import warp as wp

    return wp.array


@functools.cache
def gradient_reader():
    """A C-level reader of ``array.grad``, for the thousands of arrays read every pass.

    Warp 1.5 … 1.19's ``grad`` property is ``return self._grad``: reading ``_grad`` directly skips a Python call
    per array (~1 ms a cartpole pass). Any other getter is used as it is."""
    from operator import attrgetter

    getter = getattr(getattr(array_class(), "grad", None), "fget", None)
    code = getattr(getter, "__code__", None)
    plain = code is not None and code.co_names == ("_grad",) and code.co_argcount == 1
    return attrgetter("_grad" if plain else "grad")


def struct_type_class():
    """The class of ``wp.struct`` types (the dtype of an array of structs)."""
    import warp as wp

    @wp.struct
    class _Probe:
        x: float

    return type(_Probe)


_WARP_RUNTIME = (
    "warp._src",  # 1.19 keeps the runtime here; older releases in the modules below
    "warp.types",
    "warp.context",
    "warp.tape",
    "warp.codegen",
    "warp.utils",
    "warp.render",
    "warp.build",
    "warp.config",
)


def is_warp_runtime(module: str) -> bool:
    """Whether a class from ``module`` is Warp's machinery (devices, kernels, tapes, renderers), as opposed to
    a program written with Warp (``warp.examples``, ``warp.sim``, ``warp.optim``)."""
    return module == "warp" or module.startswith(_WARP_RUNTIME)


def is_tape(value) -> bool:
    """A ``wp.Tape`` (or a subclass, such as gradcheck's own recording tape)."""
    import warp as wp

    return isinstance(value, wp.Tape)


def is_array(value) -> bool:
    import warp as wp

    return wp.types.is_array(value)


def scalars_per_element(dtype) -> int:
    """1 for float, 3 for vec3, 9 for mat33 (``type_size`` from 1.8; ``type_length`` before)."""
    import warp as wp

    count = getattr(wp.types, "type_size", None) or wp.types.type_length
    return int(count(dtype))


def bytes_per_scalar(scalar) -> int:
    import warp as wp

    return int(wp.types.type_size_in_bytes(scalar))


def make_kernel(func, name: str):
    """``func`` as a forward-only Warp kernel with its own module, keyed ``name``.

    The per-scalar-type statistics kernels are built from one Python function, so each needs a distinct
    key: ``wp.kernel(name=...)`` from 1.10; before it the key is the function's qualified name, and before
    1.6 there is no ``module="unique"`` (the kernel then joins gradcheck.probes.kernels' module)."""
    import inspect

    import warp as wp

    accepted = inspect.signature(wp.kernel).parameters
    if "name" in accepted:
        return wp.kernel(func, name=name, enable_backward=False, module="unique")
    func.__name__ = func.__qualname__ = name
    if "module" in accepted:
        return wp.kernel(func, enable_backward=False, module="unique")
    return wp.kernel(func, enable_backward=False)


def is_float_array(array) -> bool:
    """float16/32/64 scalars, vectors or matrices: the arrays gradients and statistics apply to."""
    return getattr(scalar_type(array.dtype), "__name__", "") in ("float16", "float32", "float64")


def scalar_type(dtype):
    """float32 for float32, vec3f, mat33f …"""
    return getattr(dtype, "_wp_scalar_type_", dtype)


def is_struct_instance(value) -> bool:
    return hasattr(value, "_cls") and hasattr(value, "_ctype") and not isinstance(value, type)


def is_struct_type(dtype) -> bool:
    """True for the dtype of an array of structs (a ``wp.struct`` class)."""
    return type(dtype).__name__ == "Struct" and hasattr(dtype, "vars") and hasattr(dtype, "ctype")


def is_array_var(var) -> bool:
    """Struct field annotated as an array (``wp.array(dtype=float)``, ``wp.array[float]``, ``wp.array2d[vec3]``)."""
    import warp as wp

    matches = _matches_array_class()
    if matches is None:  # before 1.8: annotations are array instances (wp.array(dtype=float)); no wp.array[float]
        return isinstance(var.type, wp.array)
    return matches(var.type, wp.array)


@functools.cache
def _matches_array_class():
    """Warp's test for "this annotation is an array": ``warp.types`` from 1.8, ``warp._src.types`` since 1.19
    moved it (looking only in ``warp.types`` there silently treats every ``wp.array[T]`` field as a non-array)."""
    import warp as wp

    found = getattr(wp.types, "matches_array_class", None)
    if found is None:
        try:
            from warp._src import types as private_types
        except ImportError:
            return None
        found = getattr(private_types, "matches_array_class", None)
    return found


def struct_fields(instance):
    """(name, value, var) for each field of a struct instance."""
    for name, var in struct_vars(instance):
        yield name, getattr(instance, name), var


# A kernel entry of ``tape.launches`` is a list ``[kernel, dim, max_blocks, inputs, outputs, device, block_dim,
# metadata]`` on every release from 1.5.1 to 1.19 (``dim`` an int before 1.19, a tuple since); entries added with
# ``tape.record_func`` are callables. Indexes, not unpacking: the hot loops read only these three.
LAUNCH_KERNEL, LAUNCH_INPUTS, LAUNCH_OUTPUTS, LAUNCH_METADATA = 0, 3, 4, 7


def struct_mirror(instance):
    """The ctypes structure a struct instance passes to kernels (same layout on 1.5.1 to 1.19)."""
    return instance._ctype


def argument_label(kernel, position: int) -> str:
    """``kernel.argument`` label of a launch argument (position over inputs then outputs)."""
    args = getattr(getattr(kernel, "adj", None), "args", ())
    arg = args[position].label if position < len(args) else f"arg{position}"
    return f"{getattr(kernel, 'key', kernel)}.{arg}"


def allocator_methods(allocator) -> tuple[str, str] | tuple[()]:
    """Names of a device allocator's allocate and free methods: ``allocate``/``deallocate`` from 1.10,
    ``alloc``/``free`` before (arrays free through ``allocator.deleter``, which looks ``self.free`` up
    on every call, so wrapping the instance attribute sees every free)."""
    for names in (("allocate", "deallocate"), ("alloc", "free")):
        if all(callable(getattr(allocator, n, None)) for n in names):
            return names
    return ()


def tape_gradient_keys(tape):
    """Arrays and structs the tape knows gradients for (kernel args after backward, record_func arrays)."""
    return list(getattr(tape, "gradients", {}).keys())


@dataclass(frozen=True)
class ArrayDescriptor:
    """A raw array descriptor (as stored in a struct record): where data and grad live."""

    data: int
    grad: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]


def struct_records(array):
    """Decode each record of an array of structs into {field: value} with array fields as descriptors.

    Nested struct fields decode recursively. The bytes are copied to the host once.
    """
    import ctypes

    import numpy as np

    dtype = array.dtype
    raw = np.ascontiguousarray(array.numpy()).tobytes()
    size = ctypes.sizeof(dtype.ctype)
    for i in range(array.size):
        record = dtype.ctype.from_buffer_copy(raw, i * size)
        yield i, _decode(dtype, record)


def _decode(struct_type, record) -> dict:
    out = {}
    for name, var in struct_type.vars.items():
        value = getattr(record, name)
        if is_array_var(var):
            ndim = int(value.ndim)
            out[name] = (
                var,
                ArrayDescriptor(
                    data=int(value.data or 0),
                    grad=int(value.grad or 0),
                    shape=tuple(int(s) for s in value.shape[:ndim]),
                    strides=tuple(int(s) for s in value.strides[:ndim]),
                ),
            )
        elif is_struct_type(var.type):
            out[name] = (var, _decode(var.type, value))
    return out


# -- struct instances ---------------------------------------------------------------------------------


def struct_vars(instance):
    """(name, var) for each field of a struct instance, without reading the values."""
    return instance._cls.vars.items()


def same_struct_type(a, b) -> bool:
    """Whether two struct instances are of the same ``wp.struct`` class."""
    return a._cls is b._cls


def struct_grad_keepalive(instance, name: str):
    """The old gradient array a struct keeps alive for field ``name`` after ``requires_grad``/``.grad``
    changed (Warp >= 1.7.2 stores it as ``_<name>_grad``), or None."""
    return getattr(instance, f"_{name}_grad", None)


def struct_keepalive_name(path: str, name: str) -> str:
    """How a report names that kept-alive array: ``model.geo._scale_grad``."""
    return f"{path}._{name}_grad"


# -- tape launches ------------------------------------------------------------------------------------


def tape_launches(tape) -> list:
    """The tape's launch list itself (kernel entries and record_func callables), in launch order.

    Kept by reference: ``tape.reset()`` binds a new list, so a saved one still lists this forward's launches."""
    return tape.launches


def kernel_launches(launches):
    """(index, kernel, arguments) for each kernel entry; arguments are inputs then outputs, in
    ``kernel.adj.args`` order. record_func entries (callables) are skipped."""
    for index, entry in enumerate(launches):
        if entry.__class__ is list:
            yield index, entry[LAUNCH_KERNEL], chain(entry[LAUNCH_INPUTS], entry[LAUNCH_OUTPUTS])


def launch_reads(launches):
    """(index, kernel, inputs, caller) for each kernel entry: what the launch was given to read, and where it was
    launched from (``file:line``, from the launch metadata Warp records; None when it has none)."""
    for index, entry in enumerate(launches):
        if entry.__class__ is list:
            metadata = entry[LAUNCH_METADATA] if len(entry) > LAUNCH_METADATA else None
            caller = (metadata or {}).get("caller") if isinstance(metadata, dict) else None
            where = f"{caller['file']}:{caller['lineno']}" if caller and "file" in caller else None
            yield index, entry[LAUNCH_KERNEL], entry[LAUNCH_INPUTS], where


def launch_inputs_outputs(launches):
    """(inputs, outputs) of each kernel entry on a tape, as the launch listed them; record_func entries skipped."""
    for entry in launches:
        if entry.__class__ is list:
            yield entry[LAUNCH_INPUTS], entry[LAUNCH_OUTPUTS]


def recorded_functions(launches):
    """(index, backward, copy) for each ``record_func`` entry on a tape; ``copy`` is (dest, src) when the entry is
    the adjoint ``wp.copy`` records for a whole-array copy (also behind ``wp.clone`` and ``array.assign``), else
    None. Read from the closure of the lambda ``warp.copy`` records."""
    for index, entry in enumerate(launches):
        if entry.__class__ is list or not callable(entry):
            continue
        code = getattr(entry, "__code__", None)
        cells = getattr(entry, "__closure__", None) or ()
        names = dict(zip(code.co_freevars, (c.cell_contents for c in cells))) if code is not None else {}
        is_copy = getattr(entry, "__qualname__", "").startswith("copy.") and "dest" in names and "src" in names
        count = names.get("count") or 0
        whole = (
            is_copy
            and not names.get("dest_offset")
            and not names.get("src_offset")
            and (count == 0 or count == getattr(names["src"], "size", -1) == getattr(names["dest"], "size", -2))
        )
        yield index, entry, (names["dest"], names["src"]) if is_copy and whole else None


def backward_disabled(kernel) -> bool:
    """Whether the kernel was built with ``enable_backward=False`` (its own option, else its module's), as
    Warp's Tape.backward itself decides when it warns."""
    flag = (getattr(kernel, "options", None) or {}).get("enable_backward")
    if flag is None:
        flag = (getattr(getattr(kernel, "module", None), "options", None) or {}).get("enable_backward")
    return flag is False


def launch_kernel_names(launches) -> list[str]:
    """The kernel key of each entry, ``record_func`` for recorded functions."""
    return [entry[LAUNCH_KERNEL].key if entry.__class__ is list else "record_func" for entry in launches]


def launch_argument_list(tape) -> list:
    """Every kernel argument on the tape, launch by launch: all inputs, then all outputs (repeats kept).

    ~18,000 values a pass for a 100-step Newton rollout: built by ``chain``/``itemgetter`` in C, one chain over
    all launches rather than one per launch (1,600 tracked allocations a pass would run the cyclic GC)."""
    from operator import itemgetter

    entries = [entry for entry in tape.launches if entry.__class__ is list]
    values = list(chain.from_iterable(map(itemgetter(LAUNCH_INPUTS), entries)))
    values += chain.from_iterable(map(itemgetter(LAUNCH_OUTPUTS), entries))
    return values


def first_use_label(launches, value, suffix: str = "") -> str | None:
    """``kernel.argument`` of the first launch that passed ``value``, or None."""
    for _index, kernel, arguments in kernel_launches(launches):
        for position, argument in enumerate(arguments):
            if argument is value:
                return argument_label(kernel, position) + suffix
    return None


def recording_tape(on_launch):
    """A ``wp.Tape`` that calls ``on_launch(index, kernel key, inputs, outputs)`` after each kernel launch
    (Warp records a launch after running it, so the arguments hold what the launch left)."""
    import warp as wp

    class RecordingTape(wp.Tape):
        def record_launch(self, kernel, dim, max_blocks, inputs, outputs, device, block_dim=0, metadata=None):
            super().record_launch(kernel, dim, max_blocks, inputs, outputs, device, block_dim, metadata)
            on_launch(len(self.launches) - 1, kernel.key, inputs, outputs)

    return RecordingTape()


@contextlib.contextmanager
def intercepted_launches(before):
    """Call ``before(kernel, dim, inputs, outputs, options)`` ahead of every ``wp.launch`` made through the public
    ``warp.launch`` (how user code and Newton call it), while inside. Warp records a launch on the tape only
    after it ran, so this is the one place the values a launch is about to read can be seen."""
    import inspect

    import warp

    original = warp.launch
    signature = inspect.signature(original)

    def launch(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        a = bound.arguments
        # block_dim and record_cmd are not on every release; a launch with record_tape=False is not on the tape
        # (a custom op whose backward is recorded by hand): its own adjoint never runs
        if not a.get("adjoint") and not a.get("record_cmd") and a.get("record_tape", True):
            options = {"device": a.get("device"), "max_blocks": a.get("max_blocks", 0), "block_dim": a.get("block_dim")}
            before(a["kernel"], a["dim"], list(a["inputs"] or []), list(a["outputs"] or []), options)
        return original(*args, **kwargs)

    warp.launch = launch
    try:
        yield
    finally:
        warp.launch = original


# -- device allocators ----------------------------------------------------------------------------------


def device_allocators(device) -> list:
    """The allocator objects of a Warp device (default, pinned, current, custom) that allocate and free."""
    found = []
    for name in ("default_allocator", "pinned_allocator", "current_allocator", "_custom_allocator"):
        allocator = getattr(device, name, None)
        if allocator is not None and allocator_methods(allocator) and all(a is not allocator for a in found):
            found.append(allocator)
    return found


def wrap_allocator(allocator, wrap, marker: object):
    """Replace an allocator's allocate/free methods on the instance with ``wrap(allocate, free)``'s pair.

    Returns a function that restores the originals, or None when a ledger has wrapped ``allocator`` already
    (``marker`` is kept on it while wrapped). Arrays allocated meanwhile free through ``allocator.deleter``, which looks
    the free method up on every call, so the wrapper sees every free."""
    if getattr(allocator, "_gradcheck_ledger", None) is not None:
        return None
    names = allocator_methods(allocator)
    saved = {k: allocator.__dict__[k] for k in names if k in allocator.__dict__}
    tracked = wrap(*(getattr(allocator, n) for n in names))
    for name, method in zip(names, tracked):
        setattr(allocator, name, method)
    allocator._gradcheck_ledger = marker

    def restore() -> None:
        for key in (*names, "_gradcheck_ledger"):
            allocator.__dict__.pop(key, None)
        allocator.__dict__.update(saved)

    return restore


# -- the CUDA side of this installation -----------------------------------------------------------------


def cuda_runtime_info() -> dict:
    """What Warp's runtime knows about CUDA here, whether or not a GPU is present: the toolkit Warp was built
    with, the driver (None without one), and the architectures NVRTC can compile for (it runs driverless)."""
    import warp as wp

    wp.init()
    try:
        from warp._src.context import runtime
    except ImportError:  # Warp < 1.10
        from warp.context import runtime
    archs = getattr(runtime, "nvrtc_supported_archs", None)
    return {
        "toolkit": ".".join(map(str, runtime.toolkit_version)) if getattr(runtime, "toolkit_version", None) else None,
        "driver": ".".join(map(str, runtime.driver_version)) if getattr(runtime, "driver_version", None) else None,
        "nvrtc_archs": sorted(int(a) for a in archs) if archs else [],
    }
