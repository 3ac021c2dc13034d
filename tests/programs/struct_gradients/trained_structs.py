"""An array of structs (two float fields) trained by SGD with its gradient never zeroed: under exec its gradient is a
param's like any float array's (statistics of its float fields, in place), never an internal error."""

import warp as wp


@wp.struct
class P:
    a: float
    b: float


@wp.kernel
def energy(ps: wp.array(dtype=P), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, ps[i].a * ps[i].a + 2.0 * ps[i].b)


@wp.kernel
def step(ps: wp.array(dtype=P), g: wp.array(dtype=P)):
    i = wp.tid()
    p = ps[i]
    p.a = p.a - 0.01 * g[i].a
    p.b = p.b - 0.01 * g[i].b
    ps[i] = p


ps = wp.zeros(8, dtype=P, requires_grad=True)
for _iteration in range(4):
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(energy, dim=8, inputs=[ps], outputs=[loss])
    tape.backward(loss)
    wp.launch(step, dim=8, inputs=[ps, ps.grad])
