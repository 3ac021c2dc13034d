"""FALSE internal-error: launches whose arguments are not ordinary arrays (Warp's test_array_subclass).

A host-side wp.fixedarray passed to wp.launch: Warp raises (the program expects it and catches it). An object
whose __class__ property claims wp.array but which only provides __array_interface__: Warp launches it as an
external array, correctly. gradcheck exec: internal-error "observer: launch failed: AttributeError: 'fixedarray'
object has no attribute 'ptr'" (in warp.tests.test_array_subclass also 'ClassSpoof' and 'FixedChild'), exit 1.
"""

import numpy as np
import warp as wp


@wp.kernel(enable_backward=False)
def read(a: wp.array[float], out: wp.array[float]):
    out[wp.tid()] = a[wp.tid()] * 2.0


out = wp.zeros(4, dtype=float)
try:
    wp.launch(read, 1, inputs=[wp.fixedarray(dtype=float, shape=1)], outputs=[out])
except (TypeError, RuntimeError) as exc:
    print("warp refused the fixedarray:", type(exc).__name__)

values = np.arange(4, dtype=np.float32)


class ClassSpoof:
    @property
    def __class__(self):
        return wp.array

    @property
    def __array_interface__(self):
        return values.__array_interface__

    def __ctype__(self):
        raise AssertionError("treated as a Warp array")


wp.launch(read, 4, inputs=[ClassSpoof()], outputs=[out])
print("out", out.numpy())
assert np.array_equal(out.numpy(), values * 2)
