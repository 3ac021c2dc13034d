"""The values a launch's arguments carry, as the per-launch adjoint test sees them: arrays, arrays inside structs,
arrays of structs, and the float numbers inside each.

A kernel argument is a plain array, a ``wp.struct`` instance (whose array fields, nested structs included, are
arrays the kernel reads and writes like any other), or a value (int, float, vector: a launch constant, no adjoint
flows back through it). The test works on *leaves*: every array a launch reaches, struct fields flattened in
field order, so a struct-taking kernel is perturbed and weighed field by field like any other. To replay it on
private copies, each struct is rebuilt with the copies in place of its arrays; its adjoint is a struct of the
same type whose array fields are the adjoint buffers, as ``Tape.get_adjoint`` builds it.

Float numbers: a float array is itself; an array of structs holds records whose float fields (vectors included)
are the differentiable numbers (NVIDIA/warp#1174 family), the rest (ints, pointers of array fields) is carried
as is. Both read and write as float64 matrices (one row per element) so the test perturbs and weighs them alike.
"""

from __future__ import annotations

from gradcheck.warp_compat import is_plain_array


def leaves(values) -> list:
    """Every array reachable from a launch's argument list, in argument order, struct fields in field order
    (arrays without memory skipped: nothing to copy or perturb)."""
    from gradcheck.warp_compat import array_class, arrays_of

    array_type = array_class()
    return [array for value in values for array in arrays_of(value, array_type)]


def substitute(value, private: dict):
    """The argument with every array replaced by its private copy (``private``: id(array) → copy); a struct is
    rebuilt (a new instance of its type: the program's own is never written)."""
    from gradcheck.warp_compat import is_struct_instance, new_struct_like, struct_fields

    if is_plain_array(value):
        return private.get(id(value), value)
    if not is_struct_instance(value):
        return value
    rebuilt = new_struct_like(value)
    for name, field, _var in struct_fields(value):
        setattr(rebuilt, name, substitute(field, private))
    return rebuilt


def adjoint_of(value, adjoints: dict):
    """The adjoint argument for ``value`` (``adjoints``: id(array) → its adjoint buffer): the buffer for an array
    (None without one), for a struct a struct of its type with the buffers in its array fields, as Warp's
    ``Tape.get_adjoint`` builds it; zero of a value's type (None for what has no zero)."""
    from gradcheck.warp_compat import is_struct_instance, new_struct_like, struct_fields

    if is_plain_array(value):
        return adjoints.get(id(value))
    if is_struct_instance(value):
        adjoint = new_struct_like(value)
        for name, field, _var in struct_fields(value):
            if is_plain_array(field) or is_struct_instance(field):
                setattr(adjoint, name, adjoint_of(field, adjoints))
        return adjoint
    try:
        return type(value)(0) if not isinstance(value, bool) else False
    except Exception:  # noqa: BLE001 - vectors and the like: Warp accepts None for an unused adjoint
        return None


# -- float numbers -----------------------------------------------------------------------------------------


def has_floats(array) -> bool:
    """Whether the array holds differentiable numbers: a float array, or an array of structs with float fields."""
    from gradcheck.warp_compat import is_float_array, is_struct_type

    if is_float_array(array):
        return True
    return is_struct_type(array.dtype) and bool(_float_fields(array.numpy().dtype))


def floats(array):
    """The array's float numbers as float64: its values for a float array, one row of record floats per element
    for an array of structs."""
    return float_numbers(array.numpy())


def float_numbers(values):
    """``floats`` of an array's values already read (numpy): always a new array, never a view of them."""
    import numpy as np

    if values.dtype.names is None:
        return values.astype(np.float64)
    return np.concatenate(
        [values[name].reshape(values.shape[0], -1).astype(np.float64) for name in _float_fields(values.dtype)], axis=1
    )


def with_floats(array, numbers):
    """The array's values (a numpy array of its own dtype) with its float numbers replaced by ``numbers``."""
    return with_float_numbers(array.numpy(), numbers)


def with_float_numbers(values, numbers):
    """``with_floats`` of an array's values already read (numpy): a new array, ``values`` left as they are."""
    import numpy as np

    if values.dtype.names is None:
        return np.asarray(numbers).reshape(values.shape).astype(values.dtype)
    out = values.copy()
    column = 0
    for name in _float_fields(values.dtype):
        width = int(np.prod(values.dtype[name].shape)) if values.dtype[name].shape else 1
        part = np.asarray(numbers)[:, column : column + width]
        out[name] = part.reshape(out[name].shape).astype(out[name].dtype)
        column += width
    return out


def _float_fields(dtype) -> list[str]:
    """Names of the float fields (scalars, vectors, matrices) of a record dtype; nested records are not flattened
    (their floats are left as they are: rare, and a wrong flattening would corrupt the record)."""
    names = []
    for name in dtype.names or ():
        base = dtype[name].base
        if base.names is None and base.kind == "f":
            names.append(name)
    return names


def leaf_labels(launch) -> dict:
    """id(array) → ``kernel.argument`` for each array a launch reaches (``kernel.argument.field`` inside a struct):
    how a finding names an array the program never named."""
    from gradcheck.warp_compat import is_struct_instance, kernel_argument_names, struct_fields

    labels: dict = {}
    names = kernel_argument_names(launch.kernel)
    key = getattr(launch.kernel, "key", "kernel")

    def visit(value, label):
        if is_plain_array(value):
            labels.setdefault(id(value), label)
        elif is_struct_instance(value):
            for name, field, _var in struct_fields(value):
                visit(field, f"{label}.{name}")

    for position, value in enumerate(list(launch.inputs) + list(launch.outputs)):
        visit(value, f"{key}.{names[position] if position < len(names) else f'arg{position}'}")
    return labels
