"""w's second half feeds the loss through a kernel built with ``enable_backward=False`` (a real break), handed the
view ``w[4:8]``; the program prints ``w`` inside the tape, as a training log does. The break is the kernel, found
through the view; the print is no cause."""

import numpy as np
import warp as wp


@wp.kernel(enable_backward=False)
def fwd(a: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = a[i] * 2.0


@wp.kernel
def lossk(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i] * y[i])


@wp.kernel
def sgd(w: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    w[i] = w[i] - lr * g[i]


w = wp.array(np.arange(8, dtype=np.float32) * 0.1, dtype=float, requires_grad=True)
for it in range(3):
    y = wp.zeros(4, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        print("w", w.numpy())
        wp.launch(fwd, dim=4, inputs=[w[4:8]], outputs=[y])
        wp.launch(lossk, dim=4, inputs=[y], outputs=[loss])
    tape.backward(loss)
    print(it, loss.numpy()[0])
    wp.launch(sgd, dim=8, inputs=[w, w.grad, 0.01])
    tape.zero()
