"""A correct rollout whose external-force buffer is refreshed with ``assign`` before every step, inside the tape.
The force enters the dynamics additively, so no adjoint reads its values: the gradient of k is exact (the program
prints AD next to central finite differences). Backward replays the steps with the last force, harmlessly."""

import numpy as np
import warp as wp

N, T, dt = 4, 5, 0.1


@wp.kernel
def step(
    x: wp.array(dtype=float),
    v: wp.array(dtype=float),
    ext: wp.array(dtype=float),
    k: wp.array(dtype=float),
    x1: wp.array(dtype=float),
    v1: wp.array(dtype=float),
):
    i = wp.tid()
    v1[i] = v[i] + dt * (ext[i] - k[0] * x[i])
    x1[i] = x[i] + dt * v1[i]


@wp.kernel
def lossk(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


@wp.kernel
def sgd(w: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    w[0] = w[0] - lr * g[0]


k = wp.array([2.0], dtype=float, requires_grad=True)
ext = wp.zeros(N, dtype=float)


def rollout(record):
    xs = [wp.array(np.linspace(0.1, 1, N), dtype=float, requires_grad=True)] + [
        wp.zeros(N, dtype=float, requires_grad=True) for _ in range(T)
    ]
    vs = [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(T + 1)]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    for t in range(T):
        ext.assign(np.full(N, np.sin(t), dtype=np.float32))
        wp.launch(step, dim=N, inputs=[xs[t], vs[t], ext, k], outputs=[xs[t + 1], vs[t + 1]])
    wp.launch(lossk, dim=N, inputs=[xs[T]], outputs=[loss])
    return loss


for it in range(3):
    tape = wp.Tape()
    with tape:
        loss = rollout(True)
    tape.backward(loss)
    g = k.grad.numpy()[0]
    k0 = k.numpy()[0]
    e = 1e-2
    k.assign([k0 + e])
    lp = rollout(False).numpy()[0]
    k.assign([k0 - e])
    lm = rollout(False).numpy()[0]
    k.assign([k0])
    print(it, loss.numpy()[0], "AD", g, "FD", (lp - lm) / (2 * e))
    wp.launch(sgd, dim=1, inputs=[k, k.grad, 0.01])
    tape.zero()
