"""A correct rollout into one preallocated trajectory: each step reads the whole array (row t) and writes row t + 1
through a view (``traj[t + 1]``). No row changes after the step that reads it, so the gradient is right: a write
through a view of an input is a launch on the tape, never a change "outside the tape's launches"."""

import numpy as np
import warp as wp

T, N = 4, 8


@wp.kernel
def step(traj: wp.array2d(dtype=float), t: int, k: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = traj[t, i] * k[0] + 0.1


@wp.kernel
def lossk(traj: wp.array2d(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, traj[T_LAST, i] * traj[T_LAST, i])


T_LAST = wp.constant(T)


@wp.kernel
def sgd(w: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    w[0] = w[0] - lr * g[0]


k = wp.array([0.9], dtype=float, requires_grad=True)
traj = wp.zeros((T + 1, N), dtype=float, requires_grad=True)
traj0 = np.ones((T + 1, N), dtype=np.float32)
for it in range(3):
    traj.assign(traj0)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for t in range(T):
            wp.launch(step, dim=N, inputs=[traj, t, k], outputs=[traj[t + 1]])
        wp.launch(lossk, dim=N, inputs=[traj, loss])
    tape.backward(loss)
    print(it, loss.numpy()[0], k.grad.numpy()[0])
    wp.launch(sgd, dim=1, inputs=[k, k.grad, 0.01])
    tape.zero()
