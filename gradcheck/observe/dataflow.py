"""Which arrays a tape's launches made depend on which params: the forward dataflow of one recording.

Backward runs the dataflow in reverse: a gradient left in an array that depends on a param is propagated into
that param's gradient by the adjoint of the launch that wrote it. So a leftover in such an array contaminates the
param's gradient as surely as a leftover in the param's own gradient does (gradcheck.observe.leftovers).
"""

from __future__ import annotations


def influence(tape, sources: list) -> dict[int, set[int]]:
    """id(array) → indices (into ``sources``) of the source arrays whose values reach it through the tape's launches
    and recorded copies, in recording order. A launch passes what it reads (its code loads the values) on to
    every argument it writes."""
    from gradcheck.warp_compat import (
        argument_access,
        array_class,
        arrays_of,
        kernel_argument_names,
        kernel_launches,
        recorded_functions,
        tape_launches,
    )

    array_type = array_class()
    reach: dict[int, set[int]] = {id(s): {i} for i, s in enumerate(sources)}
    launches = tape_launches(tape)
    kernels = {index: (kernel, list(arguments)) for index, kernel, arguments in kernel_launches(launches)}
    copies = {index: copy for index, _backward, copy in recorded_functions(launches) if copy is not None}
    for index in sorted([*kernels, *copies]):
        if index in copies:  # a recorded whole-array copy: dest takes src's dependencies
            dest, src = copies[index]
            if id(src) in reach:
                reach.setdefault(id(dest), set()).update(reach[id(src)])
            continue
        kernel, arguments = kernels[index]
        access = argument_access(kernel)
        labels = kernel_argument_names(kernel)
        named = [(labels[i] if i < len(labels) else "", v) for i, v in enumerate(arguments)]
        incoming: set[int] = set()
        for label, value in named:
            if access.reads_value(label):
                for array in arrays_of(value, array_type):
                    incoming |= reach.get(id(array), set())
        if not incoming:
            continue
        for label, value in named:
            if access.writes_to(label):
                for array in arrays_of(value, array_type):
                    reach.setdefault(id(array), set()).update(incoming)
    return reach
