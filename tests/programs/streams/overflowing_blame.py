"""A program whose values sit at float32's edge: exp(88.7) overflows once the per-launch adjoint test (exec --blame)
perturbs it, so gradcheck's own NumPy arithmetic meets inf - inf. The program warns once itself (its warning must
still reach its stderr) and, with ``--strict``, turns every warning into an error as ``python -W error`` or a
pytest ``filterwarnings = error`` would: gradcheck's arithmetic must not become the program's exception then."""

import sys
import warnings

import numpy as np
import warp as wp

if "--strict" in sys.argv:
    warnings.simplefilter("error")


@wp.kernel
def grow(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.exp(x[i]) * x[i]


@wp.kernel
def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i])


x = wp.array(np.array([88.6, 88.7, 1.0, 0.0], dtype=np.float32), requires_grad=True)
y = wp.zeros(4, requires_grad=True)
loss = wp.zeros(1, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch(grow, dim=4, inputs=[x, y])
    wp.launch(total, dim=4, inputs=[y, loss])
tape.backward(loss)
print(x.grad.numpy())
if "--strict" not in sys.argv:
    warnings.warn("the program's own warning", UserWarning, stacklevel=1)
for _ in range(3):  # python shows a warning once per location: gradcheck's hooks in between must not make it twice
    tape.zero()
    with tape:
        wp.launch(grow, dim=4, inputs=[x, y])
        wp.launch(total, dim=4, inputs=[y, loss])
    tape.backward(loss)
    if "--strict" not in sys.argv:
        warnings.warn("the program's warning at one place", UserWarning, stacklevel=1)
