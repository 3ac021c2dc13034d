"""A struct field's array gets a new ``.grad`` (a seed) after the struct was assigned, and backward reads the new
one (Warp's test_composite_component_adjoint: a component store's adjoint is built from the live ``.grad``).
The mirror's pointer is stale, but backward writes nothing into the old buffer: not an error.
"""

import numpy as np
import warp as wp


@wp.struct
class Holder:
    values: wp.array[wp.vec3]


@wp.kernel
def write_x(holder: Holder, src: wp.array[float]):
    holder.values[0].x = src[0]


src = wp.array([2.0], dtype=float, requires_grad=True)
values = wp.zeros(1, dtype=wp.vec3, requires_grad=True)
holder = Holder()
holder.values = values
tape = wp.Tape()
with tape:
    wp.launch(write_x, 1, inputs=[holder, src])
values.grad = wp.array([[3.0, 0.0, 0.0]], dtype=wp.vec3)  # the seed, in a new buffer
tape.backward()
np.testing.assert_allclose(values.numpy(), [[2.0, 0.0, 0.0]])
np.testing.assert_allclose(src.grad.numpy(), [3.0])  # only the new buffer holds 3.0
print("src.grad", src.grad.numpy())
