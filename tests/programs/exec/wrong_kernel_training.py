"""A training script (fit light intensities and directions to a target shading) whose kernels take a struct, run
unmodified under ``gradcheck exec --blame``.

- ``--kernel runtime-loop``: the Lambert sum runs over ``range(lights.num_lights)`` (a trip count known only at run
  time) and is squared after the loop: Warp's adjoint of that value is zero (NVIDIA/warp#729 family).
- ``--kernel forgetful``: a ``@wp.func_grad`` that forgets the chain-rule factor 2 inside the struct-taking kernel.
- ``--kernel in-place``: the shading is scaled by an exposure in place (``s[i] = s[i] * exposure[i]``): Warp's
  backward replays it with the scaled values, so the exposure's gradient is wrong.
- default: the same with a constant loop bound and a guard, a right ``@wp.func_grad``, a separate output array.
"""

import argparse

import numpy as np
import warp as wp

parser = argparse.ArgumentParser()
parser.add_argument("--kernel", default="clean", choices=["clean", "runtime-loop", "forgetful", "in-place"])
parser.add_argument("--iters", type=int, default=4)
options = parser.parse_args()

MAX_LIGHTS = 4


@wp.struct
class Lights:
    dirs: wp.array(dtype=wp.vec3)
    intensities: wp.array(dtype=float)
    num_lights: int


@wp.func
def square(x: float):
    return x * x


@wp.func_grad(square)
def adj_square(x: float, adj_ret: float):
    wp.adjoint[x] += 2.0 * x * adj_ret


@wp.func
def square_forgetful(x: float):
    return x * x


@wp.func_grad(square_forgetful)
def adj_square_forgetful(x: float, adj_ret: float):
    wp.adjoint[x] += x * adj_ret  # the factor 2 forgotten


@wp.kernel
def shade(normals: wp.array(dtype=wp.vec3), lights: Lights, out: wp.array(dtype=float)):
    i = wp.tid()
    lambert = float(0.0)  # noqa: UP018 - a dynamic loop cannot mutate a literal constant
    for k in range(MAX_LIGHTS):
        if k < lights.num_lights:
            lambert = lambert + lights.intensities[k] * wp.max(wp.dot(normals[i], lights.dirs[k]), 0.0)
    out[i] = square(lambert)


@wp.kernel
def shade_runtime_loop(normals: wp.array(dtype=wp.vec3), lights: Lights, out: wp.array(dtype=float)):
    i = wp.tid()
    lambert = float(0.0)  # noqa: UP018 - a dynamic loop cannot mutate a literal constant
    for k in range(lights.num_lights):
        lambert = lambert + lights.intensities[k] * wp.max(wp.dot(normals[i], lights.dirs[k]), 0.0)
    out[i] = lambert * lambert


@wp.kernel
def shade_forgetful(normals: wp.array(dtype=wp.vec3), lights: Lights, out: wp.array(dtype=float)):
    i = wp.tid()
    lambert = float(0.0)  # noqa: UP018 - a dynamic loop cannot mutate a literal constant
    for k in range(MAX_LIGHTS):
        if k < lights.num_lights:
            lambert = lambert + lights.intensities[k] * wp.max(wp.dot(normals[i], lights.dirs[k]), 0.0)
    out[i] = square_forgetful(lambert)


@wp.kernel
def expose_in_place(s: wp.array(dtype=float), exposure: wp.array(dtype=float)):
    i = wp.tid()
    s[i] = s[i] * exposure[i]


@wp.kernel
def expose(s: wp.array(dtype=float), exposure: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = s[i] * exposure[i]


@wp.kernel
def squared_error(s: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = s[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd(x: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * g[i]


@wp.kernel
def sgd3(x: wp.array(dtype=wp.vec3), g: wp.array(dtype=wp.vec3), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * g[i]


n = 64
rng = np.random.default_rng(0)
normals = rng.standard_normal((n, 3))
normals /= np.linalg.norm(normals, axis=1, keepdims=True)
normals[:, 2] = np.abs(normals[:, 2]) + 0.5
normals = wp.array(normals, dtype=wp.vec3)
lights = Lights()
lights.dirs = wp.array([[0.2, 0.1, 1.0], [0.5, -0.3, 0.8], [-0.4, 0.2, 0.9]], dtype=wp.vec3, requires_grad=True)
lights.intensities = wp.array([0.8, 0.5, 0.3], dtype=float, requires_grad=True)
lights.num_lights = 3
exposure = wp.array(np.linspace(1.5, 2.5, n), dtype=float, requires_grad=True)
target = wp.array(np.full(n, 0.6), dtype=float)
kernel = {"runtime-loop": shade_runtime_loop, "forgetful": shade_forgetful}.get(options.kernel, shade)
shaded = wp.zeros(n, dtype=float, requires_grad=True)
exposed = wp.zeros(n, dtype=float, requires_grad=True)
for _step in range(options.iters):
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, dim=n, inputs=[normals, lights], outputs=[shaded])
        if options.kernel == "in-place":
            wp.launch(expose_in_place, dim=n, inputs=[shaded, exposure])
            result = shaded
        else:
            wp.launch(expose, dim=n, inputs=[shaded, exposure], outputs=[exposed])
            result = exposed
        wp.launch(squared_error, dim=n, inputs=[result, target], outputs=[loss])
    tape.backward(loss)
    wp.launch(sgd, dim=3, inputs=[lights.intensities, lights.intensities.grad, 0.0002])
    wp.launch(sgd3, dim=3, inputs=[lights.dirs, lights.dirs.grad, 0.0002])
    wp.launch(sgd, dim=n, inputs=[exposure, exposure.grad, 0.0002])
    tape.zero()
print(f"loss {loss.numpy()[0]:.6f}")
