"""A straight-line fit whose chain from ``offset`` to the loss breaks in one of the ways Warp users meet.

Why: "why is my gradient zero?" is answered by a place in the program. Each fault below breaks the chain from the
param ``offset`` to the loss in one way, while ``gain``'s chain stays intact, so that missing-gradient can be
checked to name the cause, the array and the launch (``evidence["break"]``) under ``gradcheck run``; the plain
script tests/programs/exec/broken_chain.py does the same under ``gradcheck exec``.

32 points: scale multiplies x by ``gain``; broadcast spreads ``offset`` over the points (``bump``); combine adds
the two; squared_error sums the mean squared error against the line 1.5 x + 0.3 (plus a small wiggle) into one
loss. Params: ``gain`` and ``offset`` (one value each; 1.0 and 0.1).

Faults, each a real broken chain: the loss depends on ``offset``, its gradient is exactly 0. Measured on CPU,
Warp 1.19, with ``ad_vs_fd`` in tests/test_chain_breaks.py: dL/d offset by AD (one tape.backward) vs the central
finite difference of the loss, step 1e-2, the loss differences taken in float64. Clean: AD -0.4000 vs FD -0.4000
(dL/d gain AD -0.3887 vs FD -0.3887, in every variant: its chain is intact).
- ``no-backward``: broadcast is built with ``enable_backward=False``: AD 0 vs FD -0.4000.
- ``no-grad-intermediate``: ``bump`` is allocated with ``requires_grad=False``: AD 0 vs FD -0.4000.
- ``host-round-trip``: ``bump`` goes through ``.numpy()`` and comes back as a new ``wp.array``: AD 0 vs
  FD -0.4000.
- ``outside-tape``: broadcast is launched with ``record_tape=False``. Under ``gradcheck run`` forward() runs inside
  the runner's tape, so this is how a launch made before ``with tape:`` looks here: AD 0 vs FD -0.4000.
- ``unrecorded-copy``: ``bump`` is copied with ``wp.copy`` into ``plain``, an array without a gradient, which
  combine reads (Warp records a copy only while a tape records and both arrays have a gradient): AD 0 vs
  FD -0.4000.
- ``never-read``: combine takes the offset as a Python float (``float(offset.numpy()[0])``), so no launch reads
  the array ``offset``: AD 0 vs FD -0.4000.
- ``no-adjoint-builtin``: broadcast snaps the offset to a grid of 1/256 with ``wp.floor``, which Warp
  differentiates as a constant: AD 0 vs FD -0.3914. The loss is a staircase in ``offset`` with steps of 1/256;
  the central difference spans 5 of them and sees the slope the staircase follows (a step below 1/256 sees 0 or
  a jump: gradcheck's own fd check, with its small steps, does not flag this fault).

``gradcheck run chains --fault F`` reports missing-gradient on ``offset.grad`` with ``evidence["break"]["cause"]``
no-backward, no-grad, host-round-trip, outside-tape, unrecorded-copy, never-read, no-adjoint-builtin (in the
order above); fd-mismatch also fires for all but no-adjoint-builtin. The clean variant has no finding.
"""

from __future__ import annotations

import math

import warp as wp

POINTS = 32
GRID = 256.0  # no-adjoint-builtin snaps the offset to multiples of 1/GRID


@wp.kernel
def scale(x: wp.array(dtype=float), gain: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = gain[0] * x[i]


@wp.kernel
def broadcast(offset: wp.array(dtype=float), bump: wp.array(dtype=float)):
    i = wp.tid()
    bump[i] = offset[0]


@wp.kernel(enable_backward=False)
def broadcast_forward_only(offset: wp.array(dtype=float), bump: wp.array(dtype=float)):
    i = wp.tid()
    bump[i] = offset[0]


@wp.kernel
def broadcast_snapped(offset: wp.array(dtype=float), bump: wp.array(dtype=float)):
    i = wp.tid()
    bump[i] = wp.floor(offset[0] * GRID) / GRID


@wp.kernel
def combine(y: wp.array(dtype=float), bump: wp.array(dtype=float), z: wp.array(dtype=float)):
    i = wp.tid()
    z[i] = y[i] + bump[i]


@wp.kernel
def combine_constant(y: wp.array(dtype=float), shift: float, z: wp.array(dtype=float)):
    i = wp.tid()
    z[i] = y[i] + shift


@wp.kernel
def squared_error(z: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = z[i] - target[i]
    wp.atomic_add(loss, 0, d * d / float(POINTS))


class BrokenChains:
    name = "chains"
    description = "A line fit whose chain from the offset to the loss breaks in one of seven ways (pure Warp)"
    faults = {
        "no-backward": "the kernel that spreads the offset is built with enable_backward=False",
        "no-grad-intermediate": "the array between the offset and the loss is allocated with requires_grad=False",
        "host-round-trip": "the spread offset goes through .numpy() and comes back as a new wp.array",
        "outside-tape": "the offset is spread by a launch with record_tape=False (as if made before `with tape:`)",
        "unrecorded-copy": "a wp.copy into an array without a gradient, which Warp does not record",
        "never-read": "the offset reaches the loss as a Python float: no launch reads the array",
        "no-adjoint-builtin": "the offset is snapped to a grid with wp.floor, which has no adjoint",
    }

    def setup(self, device, fault=None):
        self.fault, self.device = fault, device
        xs = [-1.0 + 2.0 * i / (POINTS - 1) for i in range(POINTS)]
        self.x = wp.array(xs, dtype=float, device=device)
        self.target = wp.array([1.5 * x + 0.3 + 0.05 * math.sin(3.0 * x) for x in xs], dtype=float, device=device)
        self.gain = wp.array([1.0], dtype=float, device=device, requires_grad=True)
        self.offset = wp.array([0.1], dtype=float, device=device, requires_grad=True)
        self.y = wp.zeros(POINTS, dtype=float, device=device, requires_grad=True)
        self.bump = wp.zeros(POINTS, dtype=float, device=device, requires_grad=fault != "no-grad-intermediate")
        self.plain = wp.zeros(POINTS, dtype=float, device=device)  # unrecorded-copy's destination: no gradient
        self.z = wp.zeros(POINTS, dtype=float, device=device, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)

    def params(self):
        return {"gain": self.gain, "offset": self.offset}

    def forward(self):
        fault, device = self.fault, self.device
        self.loss.zero_()
        wp.launch(scale, dim=POINTS, inputs=[self.x, self.gain], outputs=[self.y], device=device)
        if fault == "never-read":
            shift = float(self.offset.numpy()[0])  # the value, not the array: the tape cannot follow it
            wp.launch(combine_constant, dim=POINTS, inputs=[self.y, shift], outputs=[self.z], device=device)
        else:
            wp.launch(combine, dim=POINTS, inputs=[self.y, self._bump()], outputs=[self.z], device=device)
        wp.launch(squared_error, dim=POINTS, inputs=[self.z, self.target], outputs=[self.loss], device=device)
        return self.loss

    def _bump(self):
        """The offset spread over the points, as each fault gets it to combine."""
        fault, device = self.fault, self.device
        kernel = {"no-backward": broadcast_forward_only, "no-adjoint-builtin": broadcast_snapped}.get(fault, broadcast)
        record = fault != "outside-tape"  # record_tape=False: the launch runs, the tape never holds it
        wp.launch(kernel, dim=POINTS, inputs=[self.offset], outputs=[self.bump], device=device, record_tape=record)
        if fault == "host-round-trip":
            return wp.array(self.bump.numpy(), dtype=float, device=device, requires_grad=True)
        if fault == "unrecorded-copy":
            wp.copy(self.plain, self.bump)  # the destination has no .grad: Warp records nothing
            return self.plain
        return self.bump


scenario = BrokenChains
