"""A chain of particles joined by springs, with an optimizer step in the training loop (pure Warp).

loss = sum over springs of (|x[k+1] - x[k]| - rest)^2 + 0.1 * sum |x[k]|^2. ``after_backward``
runs one gradient-descent step, as a training loop would before reading its logged gradient
norms. Faults:
- ``nan-backward``: two neighbouring particles start at the same point; the loss is finite, but
  the adjoint of sqrt at 0 is infinite and meets a zero from dot(d, d): backward produces NaN
  (wp.length guards this case in Warp; a hand-written sqrt(dot(d, d)) does not).
- ``optimizer-in-place``: the optimizer scales the gradient buffer in place (momentum state kept in
  the gradient memory, as AdamWScheduleFree does in PyTorch) before the loop reads the norms.
- ``unit-mismatch``: the anchor weight is given in the wrong units (1e-12 instead of 1e-3), so the
  anchor's gradient is nonzero but far below what float32 can resolve against the loss.
- ``loss-not-cleared``: forward() accumulates into the loss without clearing it first: the loss grows
  call after call at the same params (a stateful forward; the gradient itself is unaffected).
- ``clock-not-reset``: the anchor drifts with a clock that forward() advances in place (passed in
  ``inputs=``, as Warp's own examples do) and never resets: every call sees another anchor position.
- ``changed-before-backward``: the scenario's backward projects the points into a slab in place before it
  calls ``tape.backward``: backward replays the energy on values the forward never saw.
- ``wrong-func-grad``: the spring term goes through a ``@wp.func`` whose hand-written ``@wp.func_grad``
  forgets the chain-rule factor 2: fd-mismatch sees it, adjoint-mismatch names the launch.
- ``runtime-loop``: the spring vector is halved in a loop whose trip count is a kernel argument (a dynamic
  loop) and used after it; Warp's adjoint replays the value from before the loop (live on 1.19, the
  NVIDIA/warp#729 family): the gradient is silently wrong, adjoint-mismatch names the launch.
- ``clone-on-tape``: the points are read directly and through a ``wp.clone`` taken inside the tape. Right on
  Warp >= 1.17; before, the copy's recorded adjoint overwrote ``x.grad`` instead of adding to it:
  adjoint-mismatch names the tape entry.
- ``ternary-same-element``: a conditional expression whose two branches read the same element
  (``x[k] if k % 2 == 0 else 0.5 * x[k]``). Right on every Warp but 1.16.0, which dropped the taken branch's
  adjoint: adjoint-mismatch names the kernel and the line.
- ``backward-opt-in``: the energy comes from a module built with ``enable_backward=False`` whose kernel opts
  back in (scenarios/_forward_only.py). Right on Warp >= 1.18; before, the adjoints of the ``@wp.func`` it
  calls were dropped: adjoint-mismatch names the kernel.
- ``record-func-assigns``: the points are doubled by a custom op whose backward is recorded with
  ``tape.record_func``; its hand-written adjoint kernel assigns ``x.grad`` (``=``) instead of adding to it
  (``+=``), dropping every other contribution (live on every Warp): adjoint-mismatch names the tape entry.
"""

from __future__ import annotations

import warp as wp

from gradcheck.scenarios._forward_only import chain_energy_opted_in
from gradcheck.scenarios._ternary import chain_energy_weighted

N = 16
LR = 0.01


@wp.func
def site_energy(x: wp.array(dtype=wp.vec3), k: int, anchor: wp.array(dtype=wp.vec3), anchor_weight: float):
    """0.1 |x_k|^2, plus the anchor's pull on the first particle."""
    e = 0.1 * wp.dot(x[k], x[k])
    if k == 0:
        pull = x[0] - anchor[0]
        e += anchor_weight * wp.dot(pull, pull)
    return e


@wp.kernel
def chain_energy(
    x: wp.array(dtype=wp.vec3),
    anchor: wp.array(dtype=wp.vec3),
    anchor_weight: float,
    rest: float,
    loss: wp.array(dtype=float),
):
    k = wp.tid()
    e = site_energy(x, k, anchor, anchor_weight)
    if k + 1 < x.shape[0]:
        d = x[k + 1] - x[k]
        stretch = wp.sqrt(wp.dot(d, d)) - rest  # |d|, written the way it often is
        e += stretch * stretch
    wp.atomic_add(loss, 0, e)


@wp.func
def spring_energy(d: wp.vec3, rest: float):
    stretch = wp.length(d) - rest
    return stretch * stretch


@wp.func_grad(spring_energy)
def adj_spring_energy(d: wp.vec3, rest: float, adj_ret: float):
    # hand-written adjoint with the chain-rule factor 2 of stretch^2 forgotten (the fault)
    stretch = wp.length(d) - rest
    wp.adjoint[d] += stretch * wp.normalize(d) * adj_ret
    wp.adjoint[rest] += -stretch * adj_ret


@wp.kernel
def chain_energy_custom(
    x: wp.array(dtype=wp.vec3),
    anchor: wp.array(dtype=wp.vec3),
    anchor_weight: float,
    rest: float,
    loss: wp.array(dtype=float),
):
    k = wp.tid()
    e = site_energy(x, k, anchor, anchor_weight)
    if k + 1 < x.shape[0]:
        e += spring_energy(x[k + 1] - x[k], rest)
    wp.atomic_add(loss, 0, e)


@wp.kernel
def chain_energy_substeps(
    x: wp.array(dtype=wp.vec3),
    anchor: wp.array(dtype=wp.vec3),
    anchor_weight: float,
    rest: float,
    substeps: int,
    loss: wp.array(dtype=float),
):
    k = wp.tid()
    e = site_energy(x, k, anchor, anchor_weight)
    if k + 1 < x.shape[0]:
        d = x[k + 1] - x[k]
        for _s in range(substeps):  # trip count known only at run time: a dynamic loop
            d = d * 0.5  # the spring is halved once per substep
        stretch = wp.length(d) - rest
        e += stretch * stretch
    wp.atomic_add(loss, 0, e)


@wp.kernel
def double_points(x: wp.array(dtype=wp.vec3), twin: wp.array(dtype=wp.vec3)):
    k = wp.tid()
    twin[k] = 2.0 * x[k]


@wp.kernel
def adj_double_points(twin_grad: wp.array(dtype=wp.vec3), x_grad: wp.array(dtype=wp.vec3)):
    k = wp.tid()
    x_grad[k] += 2.0 * twin_grad[k]


@wp.kernel
def adj_double_points_assigning(twin_grad: wp.array(dtype=wp.vec3), x_grad: wp.array(dtype=wp.vec3)):
    k = wp.tid()
    x_grad[k] = 2.0 * twin_grad[k]  # the fault: = where the adjoint must add


def active_tape():
    """The tape recording right now, as ``wp.copy`` itself finds it (a scenario's forward runs inside
    gradcheck's tape and is not handed it); None outside one."""
    try:
        from warp._src.context import runtime
    except ImportError:  # Warp < 1.10
        from warp.context import runtime
    return runtime.tape


@wp.kernel
def pair_energy(x: wp.array(dtype=wp.vec3), twin: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    k = wp.tid()
    wp.atomic_add(loss, 0, 0.05 * wp.dot(x[k], twin[k]))


@wp.kernel
def tick(clock: wp.array(dtype=float), dt: float):
    clock[0] = clock[0] + dt  # written through inputs=: the inputs/outputs split is a convention


@wp.kernel
def drifting_anchor(anchor: wp.array(dtype=wp.vec3), clock: wp.array(dtype=float), moved: wp.array(dtype=wp.vec3)):
    moved[0] = anchor[0] + clock[0] * wp.vec3(1.0, 0.0, 0.0)


@wp.kernel
def sgd_step(x: wp.array(dtype=wp.vec3), grad: wp.array(dtype=wp.vec3), lr: float):
    k = wp.tid()
    x[k] = x[k] - lr * grad[k]


@wp.kernel
def sgd_step_in_place(x: wp.array(dtype=wp.vec3), grad: wp.array(dtype=wp.vec3), lr: float):
    k = wp.tid()
    grad[k] = lr * grad[k]  # the optimizer reuses the gradient memory for its scaled update
    x[k] = x[k] - grad[k]


@wp.kernel
def project_to_slab(x: wp.array(dtype=wp.vec3), height: float):
    k = wp.tid()
    p = x[k]
    x[k] = wp.vec3(p[0], wp.min(p[1], height), p[2])


class SpringChain:
    name = "spring-chain"
    description = "Particle chain with springs and an SGD step in after_backward (pure Warp)"
    faults = {
        "nan-backward": "two particles coincide: finite loss, NaN gradient (adjoint of sqrt(dot(d, d)) at d = 0)",
        "optimizer-in-place": "the optimizer step writes into the gradient buffer before it is read",
        "unit-mismatch": "anchor weight in the wrong units (1e-12): the anchor's gradient vanishes",
        "loss-not-cleared": "forward() adds to the loss without clearing it: a different loss on every call",
        "clock-not-reset": "the anchor drifts with a clock forward() advances and never resets",
        "changed-before-backward": "the points are projected into a slab in place after forward, before backward",
        "wrong-func-grad": "the spring energy's hand-written @wp.func_grad forgets the factor 2 of stretch^2",
        "runtime-loop": "the spring vector is updated in a loop with a run-time trip count and used after it",
        "clone-on-tape": "the points are read directly and through a wp.clone recorded on the tape (wrong on Warp < 1.17)",
        "ternary-same-element": "a conditional expression whose branches read the same element (wrong on Warp 1.16.0)",
        "backward-opt-in": "an enable_backward=True kernel in a module with it off calls a @wp.func (wrong on Warp < 1.18)",
        "record-func-assigns": "a custom op's backward, recorded with tape.record_func, assigns x.grad instead of adding",
    }

    def setup(self, device, fault=None):
        self.fault = fault
        points = [(0.5 * k, 0.1 * (k % 3), 0.0) for k in range(N)]
        if fault == "nan-backward":
            points[8] = points[7]
        self.x = wp.array(points, dtype=wp.vec3, device=device, requires_grad=True)
        self.anchor = wp.array([(-1.0, 0.5, 0.25)], dtype=wp.vec3, device=device, requires_grad=True)
        self.anchor_weight = 1e-12 if fault == "unit-mismatch" else 1e-3
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)
        self.clock = wp.zeros(1, dtype=float, device=device)
        self.moved_anchor = wp.zeros(1, dtype=wp.vec3, device=device, requires_grad=True)
        self.twin = wp.zeros(N, dtype=wp.vec3, device=device, requires_grad=True)
        self.twin_adjoint = adj_double_points_assigning if fault == "record-func-assigns" else adj_double_points
        if fault == "changed-before-backward":
            self.backward = self._project_then_backward  # the clean chain keeps gradcheck's default backward

    def params(self):
        return {"x": self.x, "anchor": self.anchor}

    def forward(self):
        if self.fault != "loss-not-cleared":
            self.loss.zero_()
        anchor = self.anchor
        if self.fault == "clock-not-reset":
            wp.launch(tick, dim=1, inputs=[self.clock, 0.5])
            wp.launch(drifting_anchor, dim=1, inputs=[self.anchor, self.clock], outputs=[self.moved_anchor])
            anchor = self.moved_anchor
        if self.fault == "clone-on-tape":
            # a snapshot of the points taken inside the tape and read beside them; Warp < 1.17's copy adjoint
            # overwrites x.grad with the twin's, dropping the direct contributions
            twin = wp.clone(self.x)
            wp.launch(pair_energy, dim=N, inputs=[self.x, twin], outputs=[self.loss])
        if self.fault == "record-func-assigns":
            self._double_points()
            wp.launch(pair_energy, dim=N, inputs=[self.x, self.twin], outputs=[self.loss])
        if self.fault == "runtime-loop":
            wp.launch(
                chain_energy_substeps, dim=N, inputs=[self.x, anchor, self.anchor_weight, 0.2, 1], outputs=[self.loss]
            )
        else:
            energy = {
                "wrong-func-grad": chain_energy_custom,
                "ternary-same-element": chain_energy_weighted,
                "backward-opt-in": chain_energy_opted_in,
            }.get(self.fault, chain_energy)
            wp.launch(energy, dim=N, inputs=[self.x, anchor, self.anchor_weight, 0.4], outputs=[self.loss])
        return self.loss

    def _double_points(self):
        """twin = 2 x as a custom op: launched off the tape, its backward recorded by hand."""
        wp.launch(double_points, dim=N, inputs=[self.x], outputs=[self.twin], record_tape=False)
        tape = active_tape()
        if tape is not None:
            tape.record_func(
                backward=lambda: wp.launch(self.twin_adjoint, dim=N, inputs=[self.twin.grad], outputs=[self.x.grad]),
                arrays=[self.x, self.twin],
            )

    def _project_then_backward(self, tape, loss):
        # a constraint projection placed one line too early: backward replays chain_energy on the projected points
        wp.launch(project_to_slab, dim=N, inputs=[self.x, 0.15])
        tape.backward(loss)

    def after_backward(self):
        step = sgd_step_in_place if self.fault == "optimizer-in-place" else sgd_step
        wp.launch(step, dim=N, inputs=[self.x, self.x.grad, LR])


scenario = SpringChain
