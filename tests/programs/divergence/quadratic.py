"""The kernels of the divergence corpus: a quadratic bowl, a weighted distance (a penalty when the weight is large)
and the gradient step every program here takes with its own launch (x -= lr * g; lr < 0 is an ascent step).

loss = 1/2 sum_i K c_i x_i^2 with c = (0.25, 0.5, 0.75, 1): its largest curvature is L = K, so gradient descent
converges for a step below 2/K and diverges past it (the c = 1 direction is multiplied by |1 - step * K| each
update). ``train.py`` drives it as a training script (``gradcheck exec``), ``as_scenario.py`` as a scenario
(``gradcheck run``).
"""

import warp as wp

N = 4
SHAPE = (0.25, 0.5, 0.75, 1.0)  # c_i: the curvatures relative to the largest, K


@wp.kernel
def bowl(x: wp.array(dtype=float), k: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, 0.5 * k[i] * x[i] * x[i])


@wp.kernel
def weighted_distance(x: wp.array(dtype=float), t: wp.array(dtype=float), w: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - t[i]
    wp.atomic_add(loss, 0, w * d * d)


@wp.kernel
def step(x: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * g[i]
