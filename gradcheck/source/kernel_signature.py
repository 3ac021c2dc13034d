"""When two launches of a kernel are one adjoint test, and when a launch needs a test of its own.

Warp compiles one adjoint per kernel and argument types: a launch whose arrays have another dtype or ndim, or whose
struct argument is another ``wp.struct``, runs different code (an overload), so its adjoint is tested again. And a
kernel whose run-time loop ran at most once has not shown its loop's adjoint (gradcheck.source.loop_bounds): it is
tested again at the first launch that makes one of those loops iterate more than once.
"""

from __future__ import annotations


def kernel_identity(kernel) -> tuple:
    """The kernel, by module and key: a kernel object made again from the same code (``module="unique"``, a
    factory) is the same test."""
    module = getattr(kernel, "module", None)
    return (getattr(module, "name", None), getattr(kernel, "key", None) or id(kernel))


def argument_types(values) -> tuple:
    """One entry per argument: (dtype, ndim) of an array, the ``wp.struct`` class of a struct, the type of a value."""
    from gradcheck.warp_compat import is_plain_array, is_struct_instance

    out = []
    for value in values:
        if is_plain_array(value):
            out.append(("array", _hashable(value.dtype), getattr(value, "ndim", None)))
        elif is_struct_instance(value):
            out.append(("struct", getattr(value, "_cls", type(value))))
        else:
            out.append(type(value))
    return tuple(out)


def _hashable(dtype):
    try:
        hash(dtype)
        return dtype
    except TypeError:
        return repr(dtype)


def signature(kernel, values) -> tuple[tuple, tuple[bool | None, ...]]:
    """(the test's key: kernel and argument types, which of its run-time loops iterate more than once at this
    launch)."""
    from gradcheck.source.loop_bounds import loops_iterating
    from gradcheck.warp_compat import kernel_argument_names

    key = (kernel_identity(kernel), argument_types(values))
    return key, loops_iterating(kernel, kernel_argument_names(kernel), list(values))
