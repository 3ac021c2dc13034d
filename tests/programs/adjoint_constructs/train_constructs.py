"""A small fitting script, run unmodified, whose forward kernel uses one construct from Warp's tracker where the
adjoint came out wrong while the forward stayed right. ``--construct NAME --variant fault`` runs the wrong one,
``--variant clean`` a twin with the same construct written the way Warp differentiates correctly; ``--late`` makes
the loop's run-time trip count 1 on the first iteration and larger afterwards (a dynamic loop's adjoint bug can
hide at one iteration, so a test must look again when the bound grows).

Measured on warp 1.19.0, CPU: the tape's gradient of ``sum(w * out)`` against float64 central differences of an
independent numpy forward (throwaway script, not kept). "live" means the fault kernel is the reporter's construct
and Warp 1.19 still gets it wrong; "injected" means 1.19 gets the construct right, so the fault kernel keeps the
construct and calls a ``@wp.func`` whose ``@wp.func_grad`` gives the wrong adjoint the issue reports.

- ``nested-loops`` (warp#1293): a quaternion chained through nested run-time-bound loops. LIVE: qpos.grad
  (0.374, 0.400, 0.382, -0.289, ...) where FD gives (0.398, 0.398, 0.274, -0.350, ...); not the reported 2x, but
  wrong (the chained quaternion is carried through the inner dynamic loop); this script's own kernel is wrong at
  one joint per body too (qpos.grad[0, 0] 0.0121 where FD gives -0.2657). Clean: constant bounds with guards.
- ``pre-loop`` (warp#1694, #729 family): ``a = x[i] * x[i]`` before a ``range(n)`` loop, used after it. LIVE:
  x.grad 0 0 0 where FD gives 0.30 0.36 0.84 (n=1) and 2.20 2.64 6.16 (n=3). Clean: ``range(MAX)`` + ``if k < n``.
- ``continue-argmax`` (warp#1552): ``continue`` in an argmax over a run-time-bound double loop. The reported form
  (constant ``range(5)``) is right on 1.19 (Warp now unrolls loops with ``continue``); with a run-time bound LIVE:
  x.grad 9.23 9.23 9.23 9.23 where FD gives 9.23 -6.61 9.23 -6.61 (m=5); right at m=1 (0.0473 both): the bug is
  invisible at one iteration. Clean: constant bound, the run-time bound as a ``continue`` guard (unrolled).
- ``local-vector`` (warp#1697): ``v[0] = v[0] + x[i] * s[k]`` on a local vector in a 4-long (unrolled) loop.
  LIVE: x.grad 21.32 25.58 59.70 where FD gives 6.76 8.11 18.93 (3.15x). Clean: ``v[0] += x[i] * s[k]``.
- ``component-assign`` (warp#248): ``y[tid].x = ...`` on an array element's components. Right on 1.19 (x.grad
  9 6 2 = FD): INJECTED, the component value's adjoint is zero, as reported. Clean: the same with a right adjoint.
- ``tile-dot`` (warp#1374): ``wp.tile_dot`` in a 2-d tiled launch whose thread j == 0 writes the result. Right on
  1.19 CPU (a.grad 16 15 ... 1 = b): INJECTED, every tile element but the first gets a zero adjoint (a.grad
  16 0 ... 0, as reported). Clean: the same with a right adjoint.
- ``tile-matmul-c`` (warp#1051): ``wp.tile_matmul(a, b, c)`` accumulating into a tile ``c`` that also feeds a
  nonlinear op (``sin``). LIVE: C.grad off by up to 0.53 from FD. Clean: accumulate into a separate zero tile and
  add ``c`` after (C.grad within 1.5e-7 of FD). A and B are data and larger than C: with them as params too, the
  launch test's random direction saw only a 9% disagreement (a warning, not an error).
"""

import argparse

import numpy as np
import warp as wp

CONSTRUCTS = (
    "nested-loops", "pre-loop", "continue-argmax", "local-vector", "component-assign", "tile-dot", "tile-matmul-c"
)  # fmt: skip
parser = argparse.ArgumentParser()
parser.add_argument("--construct", required=True, choices=CONSTRUCTS)
parser.add_argument("--variant", default="clean", choices=["fault", "clean"])
parser.add_argument("--iterations", type=int, default=3)
parser.add_argument("--late", action="store_true", help="a loop's run-time trip count 1 at first, larger later")
options = parser.parse_args()

MAX_BODIES = 3
MAX_JOINTS = 3
MAX_TERMS = 4
MAX_M = 5
TILE = 16
MAT = 4
BLOCK_DIM = 64


# --- nested-loops (warp#1293) ----------------------------------------------------------------------------------


@wp.func
def apply_joint(xquat: wp.quat, angle: float, axis: wp.vec3):
    half = angle * 0.5
    qloc = wp.quat(axis[0] * wp.sin(half), axis[1] * wp.sin(half), axis[2] * wp.sin(half), wp.cos(half))
    return xquat * qloc


@wp.kernel(module="unique")
def chain_joints(
    branch_starts: wp.array(dtype=int), jntnum: wp.array(dtype=int), jntadr: wp.array(dtype=int),
    jnt_axis: wp.array(dtype=wp.vec3), qpos: wp.array2d(dtype=float), xquat: wp.array2d(dtype=wp.quat),
):  # fmt: skip
    worldid, branchid = wp.tid()
    start = branch_starts[branchid]
    end = branch_starts[branchid + 1]
    q = qpos[worldid]
    for i in range(start, end):
        r = wp.quat_identity()
        for j in range(jntnum[i]):
            r = apply_joint(r, q[jntadr[i] + j], jnt_axis[i])
        xquat[worldid, i] = r


@wp.kernel(module="unique")
def chain_joints_guarded(
    branch_starts: wp.array(dtype=int), jntnum: wp.array(dtype=int), jntadr: wp.array(dtype=int),
    jnt_axis: wp.array(dtype=wp.vec3), qpos: wp.array2d(dtype=float), xquat: wp.array2d(dtype=wp.quat),
):  # fmt: skip
    worldid, branchid = wp.tid()
    start = branch_starts[branchid]
    end = branch_starts[branchid + 1]
    q = qpos[worldid]
    for i in range(MAX_BODIES):
        if i >= start and i < end:
            r = wp.quat_identity()
            for j in range(MAX_JOINTS):
                if j < jntnum[i]:
                    r = apply_joint(r, q[jntadr[i] + j], jnt_axis[i])
            xquat[worldid, i] = r


# --- pre-loop (warp#1694) --------------------------------------------------------------------------------------


@wp.kernel(module="unique")
def spread(x: wp.array(dtype=float), s: wp.array(dtype=float), n: int, out: wp.array(dtype=float)):
    i = wp.tid()
    a = x[i] * x[i]
    acc = float(0.0)  # noqa: UP018 - a dynamic loop cannot mutate a literal constant
    for k in range(n):
        acc += s[k]
    out[i] = a * acc


@wp.kernel(module="unique")
def spread_guarded(x: wp.array(dtype=float), s: wp.array(dtype=float), n: int, out: wp.array(dtype=float)):
    i = wp.tid()
    a = x[i] * x[i]
    acc = float(0.0)  # noqa: UP018 - a dynamic loop cannot mutate a literal constant
    for k in range(MAX_TERMS):
        if k < n:
            acc += s[k]
    out[i] = a * acc


# --- continue-argmax (warp#1552) -------------------------------------------------------------------------------


@wp.kernel(module="unique")
def strongest_response(
    c_arr: wp.array2d(dtype=float), x_arr: wp.array(dtype=float), m: int, out: wp.array(dtype=float)
):
    tid = wp.tid()
    max_val = float(-1e20)  # noqa: UP018
    for p in range(m):
        for q in range(m):
            c = c_arr[p, q]
            if c == 0.0:
                continue
            d = c * (float(p + 1) + float(q + 1))
            v = x_arr[tid] * d
            if v > max_val:
                max_val = v
    out[tid] = max_val


@wp.kernel(module="unique")
def strongest_response_guarded(
    c_arr: wp.array2d(dtype=float), x_arr: wp.array(dtype=float), m: int, out: wp.array(dtype=float)
):
    tid = wp.tid()
    max_val = float(-1e20)  # noqa: UP018
    for p in range(MAX_M):
        for q in range(MAX_M):
            c = c_arr[p, q]
            if p >= m or q >= m or c == 0.0:
                continue
            d = c * (float(p + 1) + float(q + 1))
            v = x_arr[tid] * d
            if v > max_val:
                max_val = v
    out[tid] = max_val


# --- local-vector (warp#1697) ----------------------------------------------------------------------------------


@wp.kernel(module="unique")
def accumulate_local(x: wp.array(dtype=float), s: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    v = wp.vec3(0.0)
    for k in range(4):
        v[0] = v[0] + x[i] * s[k]
    out[i] = v[0] * v[0]


@wp.kernel(module="unique")
def accumulate_local_augmented(x: wp.array(dtype=float), s: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    v = wp.vec3(0.0)
    for k in range(4):
        v[0] += x[i] * s[k]
    out[i] = v[0] * v[0]


# --- component-assign (warp#248) -------------------------------------------------------------------------------


@wp.func
def scaled_lost(x: float, c: float):
    return x * c


@wp.func_grad(scaled_lost)
def adj_scaled_lost(x: float, c: float, adj_ret: float):
    wp.adjoint[c] += x * adj_ret  # x's adjoint lost, as warp#248 reported for component stores


@wp.func
def scaled(x: float, c: float):
    return x * c


@wp.func_grad(scaled)
def adj_scaled(x: float, c: float, adj_ret: float):
    wp.adjoint[x] += c * adj_ret
    wp.adjoint[c] += x * adj_ret


@wp.kernel(module="unique")
def components_lost(x: wp.array(dtype=float), y: wp.array(dtype=wp.vec3)):
    tid = wp.tid()
    y[tid].x = scaled_lost(x[tid], 2.0)
    y[tid].y = scaled_lost(x[tid], 3.0)
    y[tid].z = scaled_lost(x[tid], 4.0)


@wp.kernel(module="unique")
def components(x: wp.array(dtype=float), y: wp.array(dtype=wp.vec3)):
    tid = wp.tid()
    y[tid].x = scaled(x[tid], 2.0)
    y[tid].y = scaled(x[tid], 3.0)
    y[tid].z = scaled(x[tid], 4.0)


# --- tile-dot (warp#1374) --------------------------------------------------------------------------------------


@wp.func
def lane_first_only(v: float, lane: int):
    return v


@wp.func_grad(lane_first_only)
def adj_lane_first_only(v: float, lane: int, adj_ret: float):
    if lane == 0:  # every element but the first gets a zero adjoint, as warp#1374 reported
        wp.adjoint[v] += adj_ret


@wp.func
def lane_value(v: float, lane: int):
    return v


@wp.func_grad(lane_value)
def adj_lane_value(v: float, lane: int, adj_ret: float):
    wp.adjoint[v] += adj_ret


@wp.kernel(module="unique")
def tile_response_first_lane(a_in: wp.array2d(dtype=float), b_in: wp.array(dtype=float), out: wp.array(dtype=float)):
    i, j = wp.tid()
    a = wp.tile_map(lane_first_only, wp.tile_load(a_in[i], shape=TILE), wp.tile_arange(TILE, dtype=int))
    b = wp.tile_load(b_in, shape=TILE)
    result = wp.tile_dot(a, b)
    if j == 0:
        out[i] = result[0]


@wp.kernel(module="unique")
def tile_response(a_in: wp.array2d(dtype=float), b_in: wp.array(dtype=float), out: wp.array(dtype=float)):
    i, j = wp.tid()
    a = wp.tile_map(lane_value, wp.tile_load(a_in[i], shape=TILE), wp.tile_arange(TILE, dtype=int))
    b = wp.tile_load(b_in, shape=TILE)
    result = wp.tile_dot(a, b)
    if j == 0:
        out[i] = result[0]


# --- tile-matmul-c (warp#1051) ---------------------------------------------------------------------------------


@wp.kernel(module="unique")
def affine_into_c(
    A: wp.array2d(dtype=float), B: wp.array2d(dtype=float), C: wp.array2d(dtype=float), out: wp.array2d(dtype=float)
):
    i, j = wp.tid()
    a = wp.tile_load(A, shape=(MAT, MAT))
    b = wp.tile_load(B, shape=(MAT, MAT))
    c = wp.tile_load(C, shape=(MAT, MAT))
    s = wp.tile_map(wp.sin, c)
    wp.tile_matmul(a, b, c)
    wp.tile_store(out, wp.tile_map(wp.add, c, s))


@wp.kernel(module="unique")
def affine_separate(
    A: wp.array2d(dtype=float), B: wp.array2d(dtype=float), C: wp.array2d(dtype=float), out: wp.array2d(dtype=float)
):
    i, j = wp.tid()
    a = wp.tile_load(A, shape=(MAT, MAT))
    b = wp.tile_load(B, shape=(MAT, MAT))
    c = wp.tile_load(C, shape=(MAT, MAT))
    s = wp.tile_map(wp.sin, c)
    acc = wp.tile_zeros(shape=(MAT, MAT), dtype=float)
    wp.tile_matmul(a, b, acc)
    wp.tile_store(out, wp.tile_map(wp.add, wp.tile_map(wp.add, acc, c), s))


# --- the fit: squared error to a target, plain SGD ---------------------------------------------------------------


@wp.kernel
def squared_error(pred: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = pred[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def squared_error_vec3(pred: wp.array(dtype=wp.vec3), target: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = pred[i] - target[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


@wp.kernel
def squared_error_quat(pred: wp.array2d(dtype=wp.quat), target: wp.array2d(dtype=wp.quat), loss: wp.array(dtype=float)):
    i, j = wp.tid()
    d = pred[i, j] - target[i, j]
    wp.atomic_add(loss, 0, wp.dot(d, d))


@wp.kernel
def squared_error_2d(pred: wp.array2d(dtype=float), target: wp.array2d(dtype=float), loss: wp.array(dtype=float)):
    i, j = wp.tid()
    d = pred[i, j] - target[i, j]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd(x: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * g[i]


def trip_count(full: int, iteration: int) -> int:
    return 1 if options.late and iteration == 0 else full


rng = np.random.default_rng(0)
fault = options.variant == "fault"
construct = options.construct
lr = 0.002

if construct == "nested-loops":
    kernel = chain_joints if fault else chain_joints_guarded
    branch_starts = wp.array([0, 2, 3], dtype=int)
    jntadr = wp.array([0, 3, 6], dtype=int)
    jnt_axis = wp.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [0.6, 0.0, 0.8]], dtype=wp.vec3)
    qpos = wp.array(rng.uniform(-1.0, 1.0, (2, 9)), dtype=float, requires_grad=True)
    xquat = wp.zeros((2, MAX_BODIES), dtype=wp.quat, requires_grad=True)
    target = wp.array(np.tile([0.1, 0.2, 0.3, 0.9], (2, MAX_BODIES, 1)), dtype=wp.quat)
    params = [qpos]

    def forward(iteration, loss):
        jntnum = wp.array([trip_count(3, iteration), trip_count(2, iteration), trip_count(3, iteration)], dtype=int)
        wp.launch(kernel, dim=(2, 2), inputs=[branch_starts, jntnum, jntadr, jnt_axis, qpos], outputs=[xquat])
        wp.launch(squared_error_quat, dim=(2, MAX_BODIES), inputs=[xquat, target], outputs=[loss])

elif construct == "pre-loop":
    kernel = spread if fault else spread_guarded
    x = wp.array([0.5, 1.2, -0.7, 0.9], dtype=float, requires_grad=True)
    s = wp.array([0.3, 0.8, 1.1, 0.4], dtype=float, requires_grad=True)
    out = wp.zeros(4, dtype=float, requires_grad=True)
    target = wp.array([0.2, 1.0, 0.5, 0.6], dtype=float)
    params = [x, s]

    def forward(iteration, loss):
        wp.launch(kernel, dim=4, inputs=[x, s, trip_count(3, iteration)], outputs=[out])
        wp.launch(squared_error, dim=4, inputs=[out, target], outputs=[loss])

elif construct == "continue-argmax":
    kernel = strongest_response if fault else strongest_response_guarded
    c = rng.uniform(0.2, 1.0, (MAX_M, MAX_M)) * rng.choice([-1.0, 1.0], (MAX_M, MAX_M))
    c[rng.random((MAX_M, MAX_M)) < 0.35] = 0.0
    c[0, 0] = 0.7  # at one iteration the only entry: never skipped
    c_arr = wp.array(c, dtype=float)
    x = wp.array([0.9, -1.3, 0.4, -0.6], dtype=float, requires_grad=True)
    out = wp.zeros(4, dtype=float, requires_grad=True)
    target = wp.array([2.0, 3.0, 1.0, 1.5], dtype=float)
    params = [x]

    def forward(iteration, loss):
        wp.launch(kernel, dim=4, inputs=[c_arr, x, trip_count(MAX_M, iteration)], outputs=[out])
        wp.launch(squared_error, dim=4, inputs=[out, target], outputs=[loss])

elif construct == "local-vector":
    kernel = accumulate_local if fault else accumulate_local_augmented
    x = wp.array([0.5, 1.2, -0.7, 0.9], dtype=float, requires_grad=True)
    s = wp.array([0.3, 0.8, 1.1, 0.4], dtype=float, requires_grad=True)
    out = wp.zeros(4, dtype=float, requires_grad=True)
    target = wp.array([0.5, 4.0, 1.0, 2.0], dtype=float)
    params = [x, s]

    def forward(iteration, loss):
        wp.launch(kernel, dim=4, inputs=[x, s], outputs=[out])
        wp.launch(squared_error, dim=4, inputs=[out, target], outputs=[loss])

elif construct == "component-assign":
    kernel = components_lost if fault else components
    x = wp.array([0.5, 1.2, -0.7, 0.9], dtype=float, requires_grad=True)
    y = wp.zeros(4, dtype=wp.vec3, requires_grad=True)
    target = wp.array(rng.uniform(-2.0, 2.0, (4, 3)), dtype=wp.vec3)
    params = [x]

    def forward(iteration, loss):
        wp.launch(kernel, dim=4, inputs=[x], outputs=[y])
        wp.launch(squared_error_vec3, dim=4, inputs=[y, target], outputs=[loss])

elif construct == "tile-dot":
    kernel = tile_response_first_lane if fault else tile_response
    a = wp.array(rng.uniform(-1.0, 1.0, (2, TILE)), dtype=float, requires_grad=True)
    b = wp.array(np.linspace(1.0, -1.0, TILE), dtype=float, requires_grad=True)
    out = wp.zeros(2, dtype=float, requires_grad=True)
    target = wp.array([1.0, -1.0], dtype=float)
    params = [a, b]

    def forward(iteration, loss):
        wp.launch_tiled(kernel, dim=[2, 1], inputs=[a, b], outputs=[out], block_dim=BLOCK_DIM)
        wp.launch(squared_error, dim=2, inputs=[out, target], outputs=[loss])

else:  # tile-matmul-c
    kernel = affine_into_c if fault else affine_separate
    A = wp.array(rng.uniform(-2.0, 2.0, (MAT, MAT)), dtype=float)  # data: the fit is of the bias C
    B = wp.array(rng.uniform(-2.0, 2.0, (MAT, MAT)), dtype=float)
    C = wp.array(rng.uniform(-1.0, 1.0, (MAT, MAT)), dtype=float, requires_grad=True)
    out = wp.zeros((MAT, MAT), dtype=float, requires_grad=True)
    target = wp.array(rng.uniform(-1.0, 1.0, (MAT, MAT)), dtype=float)
    params = [C]

    def forward(iteration, loss):
        wp.launch_tiled(kernel, dim=[1], inputs=[A, B, C], outputs=[out], block_dim=BLOCK_DIM)
        wp.launch(squared_error_2d, dim=(MAT, MAT), inputs=[out, target], outputs=[loss])


for iteration in range(options.iterations):
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        forward(iteration, loss)
    tape.backward(loss)
    for p in params:
        wp.launch(sgd, dim=p.size, inputs=[p.flatten(), p.grad.flatten(), lr])
    tape.zero()
    print(f"loss {loss.numpy()[0]:.6f}")
