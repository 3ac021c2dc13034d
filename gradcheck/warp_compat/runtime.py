"""Warp's runtime: initialising it, and telling its objects apart (arrays, tapes, dtypes, kernels)."""

from __future__ import annotations

import contextlib
import functools
import sys
import warnings


def load_warp():
    """Import and initialise Warp with its module-load chatter off stdout."""
    import warp as wp

    if hasattr(wp, "LOG_WARNING") and hasattr(wp.config, "log_level"):
        wp.config.log_level = wp.LOG_WARNING
    if hasattr(wp.config, "quiet"):
        wp.config.quiet = True
    wp.init()
    return wp


def when_initialised(callback):
    """Call ``callback()`` once Warp's runtime exists: now if it does, else right after the program's own first
    initialisation. gradcheck must never initialise Warp itself around a program: that prints Warp's banner on
    the program's stdout, and a program that forgot ``wp.init()`` would work under gradcheck and fail under python.
    Warp's API calls ``init()`` through its context module, so the wrapper there sees the first one, whoever makes
    it; it removes itself then. Returns an undo (for an uninstall before Warp ever initialised)."""
    import warp as wp

    context = internal_module("context")
    if getattr(context, "runtime", None) is not None:
        callback()
        return lambda: None
    original = context.init
    public = getattr(wp, "init", None) is original

    def restore() -> None:
        if context.init is init:
            context.init = original
        if public and wp.init is init:
            wp.init = original

    @functools.wraps(original)
    def init(*args, **kwargs):
        result = original(*args, **kwargs)
        if getattr(context, "runtime", None) is not None and context.init is init:
            restore()
            callback()
        return result

    context.init = init
    if public:
        wp.init = init
    return restore


def quiet() -> _Quiet:
    """Nothing of gradcheck's reaches the program's streams while gradcheck works.

    Warp says nothing: loading gradcheck's own statistics module prints "Module gradcheck_stats_… load on device"
    on the program's stdout otherwise (``log_level`` from Warp 1.10, ``quiet`` before). Warp is not imported here:
    a program that has not imported it has nothing to silence. And no Python warning raised by gradcheck's own work
    is shown: NumPy's "invalid value encountered in subtract" from the per-launch adjoint test on a program whose
    values overflow, Warp's UserWarning when gradcheck runs a backward of its own through an ``enable_backward=False``
    kernel, are gradcheck's arithmetic, not the program's (whose stderr a user or a test suite reads, perhaps with
    ``-W error``, which would turn them into gradcheck's internal errors)."""
    return _Quiet()


class _Quiet:
    """``quiet()`` as a class: the observer enters it around its own work on every audited event (a dozen or more an
    audited backward of a training loop), where three generator-based context managers cost ~6 µs each time and a
    loop over the settings ~2 µs; the two settings by name, ~1 µs."""

    __slots__ = ("config", "quiet", "level")

    def __enter__(self) -> None:
        warnings.filters.insert(0, _IGNORE_ALL)  # as own_warnings_ignored(), below
        config = self.config = getattr(sys.modules.get("warp"), "config", None)
        if config is None:
            return
        # Warp's config while gradcheck works: ``quiet`` (before 1.10) on, ``log_level`` at least LOG_WARNING (from
        # 1.10: what Warp logs above it still shows). Only what must change is set, and kept to restore (Warp's
        # config checks each assignment, ~0.5 µs): a program that keeps Warp quiet itself costs nothing here. A
        # setting this Warp lacks reads as already quiet.
        quiet, level = getattr(config, "quiet", True), getattr(config, "log_level", 30)
        self.quiet = _UNCHANGED if quiet is True else quiet
        self.level = _UNCHANGED if isinstance(level, int) and level >= 30 else level
        if self.quiet is not _UNCHANGED:
            config.quiet = True
        if self.level is not _UNCHANGED:
            config.log_level = max(level, 30)

    def __exit__(self, *exc) -> None:
        try:
            config = self.config
            if config is not None:
                if self.quiet is not _UNCHANGED:
                    config.quiet = self.quiet
                if self.level is not _UNCHANGED:
                    config.log_level = self.level
        finally:
            try:
                warnings.filters.remove(_IGNORE_ALL)
            except ValueError:  # the list the program's own catch_warnings() put back may lack it
                pass


_UNCHANGED = object()  # a setting gradcheck did not change: nothing to restore

_IGNORE_ALL = ("ignore", None, Warning, None, 0)  # what warnings.simplefilter("ignore") puts first


@contextlib.contextmanager
def own_warnings_ignored():
    """Every warning raised meanwhile is ignored, and the program's warning state is left exactly as it was.

    Not ``warnings.catch_warnings()``: leaving it marks the filters mutated, which forgets every "already shown"
    of the program's own warnings, so a warning python shows once per location (NewtonWarning in Newton's IK tests)
    would show again after each of gradcheck's hooks. One "ignore" entry at the head of the live filter list,
    removed on the way out, changes nothing the program can see: an ignored warning is not recorded as shown."""
    warnings.filters.insert(0, _IGNORE_ALL)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):  # the list the program's own catch_warnings() put back may lack it
            warnings.filters.remove(_IGNORE_ALL)


def deterministic_atomics() -> bool:
    """Whether Warp was configured for run-to-run deterministic atomics (1.15+), so CUDA backward is bitwise stable."""
    import warp as wp

    mode = getattr(wp.config, "deterministic", None)
    if isinstance(mode, bool):
        return mode
    name = str(getattr(mode, "name", mode) or "").lower()
    return name in ("run_to_run", "gpu_to_gpu")


@functools.cache
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


@functools.cache
def struct_type_class():
    """The class of ``wp.struct`` types (the dtype of an array of structs). Found once: defining a throwaway struct
    costs ~0.6 ms, and the tape's arguments are classified after every audited backward."""
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


def is_plain_array(value) -> bool:
    """A Warp array with memory (not a struct, not a value, not an empty array, not an indexed view)."""
    return isinstance(value, array_class()) and bool(value.ptr)


def scalars_per_element(dtype) -> int:
    """1 for float, 3 for vec3, 9 for mat33 (``type_size`` from 1.8; ``type_length`` before)."""
    import warp as wp

    count = getattr(wp.types, "type_size", None) or wp.types.type_length
    return int(count(dtype))


def bytes_per_scalar(scalar) -> int:
    import warp as wp

    return int(wp.types.type_size_in_bytes(scalar))


def byte_extent(array) -> tuple[int, int]:
    """[start, end) of the bytes an array (or a view of one, strided or not) spans in device memory: how a view
    (``traj[t]``, ``w[4:8]``) is known to live inside the array it was taken from."""
    import warp as wp

    ptr = int(array.ptr)
    itemsize = int(wp.types.type_size_in_bytes(array.dtype))
    shape, strides = tuple(getattr(array, "shape", ()) or ()), tuple(getattr(array, "strides", ()) or ())
    if any(n == 0 for n in shape):
        return ptr, ptr
    if len(strides) != len(shape):
        return ptr, ptr + int(getattr(array, "size", 1)) * itemsize
    last = sum((n - 1) * abs(int(stride)) for n, stride in zip(shape, strides))
    return ptr, ptr + last + itemsize


def make_kernel(func, name: str):
    """``func`` as a forward-only Warp kernel with its own module, keyed ``name``.

    The per-scalar-type statistics kernels are built from one Python function, so each needs a distinct
    key: ``wp.kernel(name=...)`` from 1.10; before it the key is the function's qualified name, and before
    1.6 there is no ``module="unique"`` (the kernel then joins gradcheck.measure.kernels' module)."""
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


def active_tape():
    """The tape recording right now (``with tape:``), or None: where Warp's own launch looks for one."""
    return _runtime_attribute("tape")


@contextlib.contextmanager
def no_active_tape():
    """No tape recording while inside (gradcheck's own launches and copies in the middle of a program's
    ``with tape:``): Warp records into ``runtime.tape``, put back on exit."""
    runtime = internal_module("context").runtime
    saved = getattr(runtime, "tape", None)
    runtime.tape = None
    try:
        yield
    finally:
        runtime.tape = saved


def capturing() -> bool:
    """Whether the current device is capturing a graph (CUDA stream capture; on 1.19, CPU graph capture too).

    While it does, launches and copies are recorded into the program's graph, not run: gradcheck must not launch,
    copy or read anything then (its own kernels would end up in the program's graph, its reads see nothing).
    Asked on every backward of a long run: Warp is looked up, not imported (a program that asks has imported it)."""
    wp = sys.modules.get("warp")
    if wp is None:
        return False
    try:
        return bool(getattr(wp.get_device(), "is_capturing", False))
    except Exception:  # noqa: BLE001 - a device that cannot say is not capturing anything gradcheck started
        return False


def warp_version() -> str:
    import warp as wp

    return str(getattr(wp, "__version__", ""))


def _runtime_attribute(name: str):
    runtime = internal_module("context").runtime  # read each time: Warp creates it in init()
    return getattr(runtime, name, None) if runtime is not None else None


@functools.cache
def internal_module(name: str):
    """One of Warp's internal modules (``context``, ``codegen``): ``warp._src.<name>`` from 1.10, ``warp.<name>``
    before. Found once: the active tape is asked for on every launch."""
    import importlib

    try:
        return importlib.import_module(f"warp._src.{name}")
    except ImportError:
        return importlib.import_module(f"warp.{name}")


# -- the CUDA side of this installation -----------------------------------------------------------------


def cuda_runtime_info() -> dict:
    """What Warp's runtime knows about CUDA here, whether or not a GPU is present: the toolkit Warp was built
    with, the driver (None without one), and the architectures NVRTC can compile for (it runs driverless)."""
    import warp as wp

    wp.init()
    runtime = internal_module("context").runtime
    archs = getattr(runtime, "nvrtc_supported_archs", None)
    return {
        "toolkit": ".".join(map(str, runtime.toolkit_version)) if getattr(runtime, "toolkit_version", None) else None,
        "driver": ".".join(map(str, runtime.driver_version)) if getattr(runtime, "driver_version", None) else None,
        "nvrtc_archs": sorted(int(a) for a in archs) if archs else [],
    }
