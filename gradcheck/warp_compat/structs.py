"""Structs: instances with their ctypes mirror, and the raw records of an array of structs.

A struct instance passes a ctypes mirror of its fields to kernels (copied by value on assignment, never refreshed);
an array of structs holds descriptor bytes and no reference to the arrays. Layouts are the same from 1.5.1 to 1.19.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass


def is_struct_instance(value) -> bool:
    """An instance of a ``wp.struct``: Warp's own class, not the look of one (the naming walk meets every object a
    program holds, and some answer any attribute: a test runner's plugin objects, proxies, mocks)."""
    cls = _struct_instance_class()
    if cls is not None:
        return isinstance(value, cls)
    return not isinstance(value, type) and is_struct_type(getattr(value, "_cls", None)) and hasattr(value, "_ctype")


@functools.cache
def _struct_instance_class():
    """Warp's ``StructInstance`` (in its codegen module on 1.5.1 to 1.19), or None if a release drops it."""
    from gradcheck.warp_compat.runtime import internal_module

    try:
        found = getattr(internal_module("codegen"), "StructInstance", None)
    except ImportError:
        return None
    return found if isinstance(found, type) else None


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


def arrays_of(value, array_type):
    """Arrays in a launch argument: the array itself, or the array fields of a struct (recursively)."""
    if isinstance(value, array_type):
        if getattr(value, "ptr", None):  # an object that only claims to be an array (a fixedarray) has none
            yield value
    elif is_struct_instance(value):
        for _name, field_value, _var in struct_fields(value):
            yield from arrays_of(field_value, array_type)


def float_view(array):
    """An array of structs whose fields are all floats of one width (scalars, vectors, matrices) as a flat array of
    that float over the same memory, no copy: its gradient's statistics are those of the float fields, which is what
    backward writes. None for a struct with a field of another type, a nested struct, an array field or padding,
    and for a strided array (its records are not one run of floats)."""
    import warp as wp

    dtype = getattr(array, "dtype", None)
    if not is_struct_type(dtype) or not getattr(array, "ptr", None) or not array.is_contiguous:
        return None
    layout = _float_layout(dtype)
    if layout is None:
        return None
    scalar, count = layout
    return wp.array(ptr=array.ptr, dtype=scalar, shape=(array.size * count,), device=array.device)


def has_float_fields(array) -> bool:
    """An array of structs ``float_view`` reads as floats (all-float fields of one width, no padding, contiguous):
    its gradient gets a float gradient's audit (statistics, leftovers, residue), as a float array's does."""
    dtype = getattr(array, "dtype", None)
    return is_struct_type(dtype) and _float_layout(dtype) is not None and bool(getattr(array, "is_contiguous", False))


def has_float_values(array) -> bool:
    """A float array, or an array of all-float structs (its float fields, ``has_float_fields``): the gradients
    statistics, the zero audit and residue read, whichever driver runs the program."""
    from gradcheck.warp_compat.runtime import is_float_array

    return is_float_array(array) or has_float_fields(array)


@functools.lru_cache(maxsize=256)
def _float_layout(dtype):
    """(float scalar type, floats per record) of a struct type whose fields are all floats of one width and whose
    records hold nothing else (no padding), else None. Cached: asked for every gradient on every audited backward."""
    import ctypes

    import warp as wp

    from gradcheck.warp_compat.runtime import bytes_per_scalar, scalar_type, scalars_per_element

    scalars, count = set(), 0
    for var in dtype.vars.values():
        if is_struct_type(var.type) or is_array_var(var):
            return None
        scalars.add(scalar_type(var.type))
        count += scalars_per_element(var.type)
    if len(scalars) != 1 or not scalars <= {wp.float16, wp.float32, wp.float64}:
        return None
    (scalar,) = scalars
    if ctypes.sizeof(dtype.ctype) != count * bytes_per_scalar(scalar):
        return None
    return scalar, count


def struct_mirror(instance):
    """The ctypes structure a struct instance passes to kernels (same layout on 1.5.1 to 1.19)."""
    return instance._ctype


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


def new_struct_like(instance):
    """A fresh instance of the same ``wp.struct`` type (all fields at their defaults)."""
    return instance._cls()


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
