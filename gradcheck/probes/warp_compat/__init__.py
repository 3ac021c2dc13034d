"""Every touch of Warp internals, in one package.

gradcheck reads things Warp does not document as public API: tape launch entries, kernel argument names, struct
mirrors, array descriptors, the module-level launch its helpers call, allocator methods. Their layout has moved
between releases (1.19 moved the internals to ``warp._src``), so the rest of gradcheck asks this package instead
of reaching into Warp; a release that changes one of them is fixed in the one module that reads it:

- ``runtime``: initialising Warp, telling its objects apart (arrays, tapes, dtypes), the active tape, CUDA facts;
- ``structs``: struct fields, ctypes mirrors, array-of-structs records;
- ``launches``: what a tape recorded (kernel entries, ``record_func`` callables, argument names);
- ``hooks``: the patches the observer sees a program through (tape methods, launches, graph replays, host reads);
- ``kernel_access``: which arguments a kernel reads and writes, from its syntax tree;
- ``allocators``: device allocators, wrapped so allocations and frees can be followed.
"""

from gradcheck.probes.warp_compat.allocators import allocator_methods, device_allocators, wrap_allocator
from gradcheck.probes.warp_compat.hooks import (
    LaunchCall,
    called_from_warp,
    intercepted_launches,
    kernel_argument_names,
    observed,
    program_site,
)
from gradcheck.probes.warp_compat.kernel_access import ArgumentAccess, argument_access
from gradcheck.probes.warp_compat.launches import (
    LAUNCH_INPUTS,
    LAUNCH_KERNEL,
    LAUNCH_METADATA,
    LAUNCH_OUTPUTS,
    argument_label,
    backward_disabled,
    first_use_label,
    kernel_launches,
    launch_accepts,
    launch_argument_list,
    launch_inputs_outputs,
    launch_io,
    launch_kernel_names,
    launch_reads,
    recorded_functions,
    recording_tape,
    replayable_launches,
    takes_object_ids,
    tape_gradient_keys,
    tape_launches,
)
from gradcheck.probes.warp_compat.runtime import (
    active_tape,
    array_class,
    bytes_per_scalar,
    capturing,
    cuda_runtime_info,
    deterministic_atomics,
    gradient_reader,
    is_array,
    is_float_array,
    is_tape,
    is_warp_runtime,
    load_warp,
    make_kernel,
    scalar_type,
    scalars_per_element,
    struct_type_class,
    warp_version,
)
from gradcheck.probes.warp_compat.structs import (
    ArrayDescriptor,
    is_array_var,
    is_struct_instance,
    is_struct_type,
    new_struct_like,
    same_struct_type,
    struct_fields,
    struct_grad_keepalive,
    struct_keepalive_name,
    struct_mirror,
    struct_records,
    struct_vars,
)

__all__ = [
    "LAUNCH_INPUTS",
    "LAUNCH_KERNEL",
    "LAUNCH_METADATA",
    "LAUNCH_OUTPUTS",
    "ArgumentAccess",
    "ArrayDescriptor",
    "LaunchCall",
    "active_tape",
    "allocator_methods",
    "argument_access",
    "argument_label",
    "array_class",
    "backward_disabled",
    "bytes_per_scalar",
    "capturing",
    "cuda_runtime_info",
    "deterministic_atomics",
    "device_allocators",
    "first_use_label",
    "gradient_reader",
    "intercepted_launches",
    "is_array",
    "program_site",
    "called_from_warp",
    "is_array_var",
    "is_float_array",
    "is_struct_instance",
    "is_struct_type",
    "is_tape",
    "is_warp_runtime",
    "kernel_argument_names",
    "kernel_launches",
    "launch_accepts",
    "launch_argument_list",
    "launch_inputs_outputs",
    "launch_io",
    "launch_kernel_names",
    "launch_reads",
    "load_warp",
    "make_kernel",
    "observed",
    "recorded_functions",
    "recording_tape",
    "replayable_launches",
    "new_struct_like",
    "same_struct_type",
    "scalar_type",
    "scalars_per_element",
    "struct_fields",
    "struct_grad_keepalive",
    "struct_keepalive_name",
    "struct_mirror",
    "struct_records",
    "struct_type_class",
    "struct_vars",
    "takes_object_ids",
    "tape_gradient_keys",
    "tape_launches",
    "wrap_allocator",
    "warp_version",
]
