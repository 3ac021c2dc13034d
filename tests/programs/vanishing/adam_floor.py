"""A param with a physically tiny but real effect (k = 1e-3) beside a loss floor of 100, trained by Adam: every
gradient is below float32's resolution relative to the loss, yet Adam normalises its steps and carries c from 0 to
its optimum 1. ``--sgd``: the same with plain SGD, which cannot move it (the vanishing warning's case)."""

import sys

import warp as wp
from warp.optim import SGD, Adam


@wp.kernel
def floor_and_tiny(c: wp.array(dtype=float), k: float, floor: float, loss: wp.array(dtype=float)):
    d = c[0] - 1.0
    loss[0] = floor + k * k * d * d


c = wp.zeros(1, dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
optimizer = SGD([c], lr=0.1) if "--sgd" in sys.argv else Adam([c], lr=0.1)
for _ in range(30):
    tape = wp.Tape()
    with tape:
        wp.launch(floor_and_tiny, dim=1, inputs=[c, 1e-3, 100.0], outputs=[loss])
    tape.backward(loss)
    optimizer.step([c.grad])
    tape.zero()
print("c", round(float(c.numpy()[0]), 2))
