"""A tile program: ``wp.launch_tiled`` and a tile kernel under a plain ``wp.launch(..., block_dim=...)``.

Why: blame replays the launches it recorded, and ``wp.launch_tiled`` calls Warp's internal launch directly (field
notes, section 9): a patch of ``wp.launch`` never sees it, and the call site Python reports for it is inside Warp.
This program puts a hand-written ``@wp.func_grad`` under ``wp.tile_map`` in each of the two ways a tile kernel is
launched, so a wrong one is named only when blame reaches tile launches and names the program's own line.

``x`` (ROWS x COLS) times the weights ``w``, element by element, goes through the activation log(1 + z^2) (a
``@wp.func`` with its ``@wp.func_grad``, mapped over the tile) and is stored (``wp.tile_store``): ``activate``,
launched with ``wp.launch_tiled``. ``tile_error`` (launched with ``wp.launch`` and ``block_dim``) maps a squared
error against a target over the activations (another ``@wp.func`` with its ``@wp.func_grad``), sums the tile
(``wp.tile_sum``) and adds it to one loss (``wp.tile_atomic_add``). Params: ``x``, ``w``.

Faults, each a real wrong gradient. Measured on CPU, Warp 1.19: AD vs central FD of the loss along 3 random unit
directions of all the params, step 1e-3 of the params' norm, the loss differences taken in float64; clean: AD -1.284
vs FD -1.284, AD -0.5201 vs FD -0.5201, AD 0.3517 vs FD 0.3518 (rel <= 2.4e-4).
- ``tile-func-grad``: the activation's ``@wp.func_grad`` forgets the chain-rule factor d(z^2)/dz = 2z, in the
  kernel launched with ``wp.launch_tiled``: AD -0.1524 vs FD -1.284, AD -0.19 vs FD -0.5201, AD 0.187 vs FD 0.3518.
- ``block-dim-func-grad``: the squared error's ``@wp.func_grad`` forgets the factor 2 of d(e^2)/de, in the kernel
  launched with ``wp.launch(..., block_dim=BLOCK)``: every gradient halved, AD -0.642 vs FD -1.284, AD -0.2601 vs
  FD -0.5201, AD 0.1759 vs FD 0.3518.
"""

from __future__ import annotations

import math

import warp as wp

ROWS = 8
COLS = 32
BLOCK = 32  # threads per tile on CUDA; on CPU Warp runs a tile on one thread unless wp.config.enable_cpu_blocks


@wp.func
def activation(z: float):
    return wp.log(1.0 + z * z)


@wp.func_grad(activation)
def adj_activation(z: float, adj_ret: float):
    wp.adjoint[z] += 2.0 * z / (1.0 + z * z) * adj_ret


@wp.func
def activation_forgetful(z: float):
    return wp.log(1.0 + z * z)


@wp.func_grad(activation_forgetful)
def adj_activation_forgetful(z: float, adj_ret: float):
    wp.adjoint[z] += adj_ret / (1.0 + z * z)  # the fault: d log(u)/du without the chain-rule factor du/dz = 2z


@wp.func
def squared_error(a: float, target: float):
    e = a - target
    return e * e


@wp.func_grad(squared_error)
def adj_squared_error(a: float, target: float, adj_ret: float):
    e = a - target
    wp.adjoint[a] += 2.0 * e * adj_ret
    wp.adjoint[target] -= 2.0 * e * adj_ret


@wp.func
def squared_error_forgetful(a: float, target: float):
    e = a - target
    return e * e


@wp.func_grad(squared_error_forgetful)
def adj_squared_error_forgetful(a: float, target: float, adj_ret: float):
    e = a - target
    wp.adjoint[a] += e * adj_ret  # the fault: the factor 2 of d(e^2)/de is forgotten
    wp.adjoint[target] -= e * adj_ret


@wp.kernel
def activate(x: wp.array2d(dtype=float), w: wp.array2d(dtype=float), act: wp.array2d(dtype=float)):
    row = wp.tid()
    xs = wp.tile_load(x, shape=(1, COLS), offset=(row, 0))
    ws = wp.tile_load(w, shape=(1, COLS), offset=(row, 0))
    z = wp.tile_map(wp.mul, xs, ws)
    wp.tile_store(act, wp.tile_map(activation, z), offset=(row, 0))


@wp.kernel
def activate_forgetful(x: wp.array2d(dtype=float), w: wp.array2d(dtype=float), act: wp.array2d(dtype=float)):
    row = wp.tid()
    xs = wp.tile_load(x, shape=(1, COLS), offset=(row, 0))
    ws = wp.tile_load(w, shape=(1, COLS), offset=(row, 0))
    z = wp.tile_map(wp.mul, xs, ws)
    wp.tile_store(act, wp.tile_map(activation_forgetful, z), offset=(row, 0))


@wp.kernel
def tile_error(act: wp.array2d(dtype=float), target: wp.array2d(dtype=float), loss: wp.array(dtype=float)):
    row, _lane = wp.tid()
    a = wp.tile_load(act, shape=(1, COLS), offset=(row, 0))
    t = wp.tile_load(target, shape=(1, COLS), offset=(row, 0))
    wp.tile_atomic_add(loss, wp.tile_sum(wp.tile_map(squared_error, a, t)))


@wp.kernel
def tile_error_forgetful(act: wp.array2d(dtype=float), target: wp.array2d(dtype=float), loss: wp.array(dtype=float)):
    row, _lane = wp.tid()
    a = wp.tile_load(act, shape=(1, COLS), offset=(row, 0))
    t = wp.tile_load(target, shape=(1, COLS), offset=(row, 0))
    wp.tile_atomic_add(loss, wp.tile_sum(wp.tile_map(squared_error_forgetful, a, t)))


def lanes(device) -> int:
    """The trailing launch dimension a plain ``wp.launch`` of a tile kernel needs: the block size Warp really uses.
    On CPU a block is one thread unless ``wp.config.enable_cpu_blocks``: launching BLOCK lanes there would run the
    whole tile BLOCK times (``wp.launch_tiled`` appends the resolved size itself)."""
    if wp.get_device(device).is_cpu and not getattr(wp.config, "enable_cpu_blocks", False):
        return 1
    return BLOCK


class Tiles:
    name = "tiles"
    description = "tile_map with @wp.func_grad under wp.launch_tiled and wp.launch(block_dim=) (pure Warp)"
    faults = {
        "tile-func-grad": "the activation's @wp.func_grad under tile_map forgets a chain-rule factor (wp.launch_tiled)",
        "block-dim-func-grad": "the squared error's @wp.func_grad under tile_map forgets a factor 2 (wp.launch, block_dim)",
    }

    def setup(self, device, fault=None):
        self.fault = fault
        self.device = device
        x = [[0.5 * math.sin(0.3 * r + 0.2 * c) + 0.1 * r for c in range(COLS)] for r in range(ROWS)]
        w = [[1.0 + 0.5 * math.cos(0.15 * (r + 1) * c) for c in range(COLS)] for r in range(ROWS)]
        target = [[0.2 + 0.01 * ((r * COLS + c) % 7) for c in range(COLS)] for r in range(ROWS)]
        self.x = wp.array(x, dtype=float, device=device, requires_grad=True)
        self.w = wp.array(w, dtype=float, device=device, requires_grad=True)
        self.target = wp.array(target, dtype=float, device=device)
        self.act = wp.zeros((ROWS, COLS), dtype=float, device=device, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)

    def params(self):
        return {"x": self.x, "w": self.w}

    def forward(self):
        self.loss.zero_()
        act = activate_forgetful if self.fault == "tile-func-grad" else activate
        wp.launch_tiled(act, dim=[ROWS], inputs=[self.x, self.w], outputs=[self.act], block_dim=BLOCK)
        error = tile_error_forgetful if self.fault == "block-dim-func-grad" else tile_error
        dim = [ROWS, lanes(self.device)]  # the trailing lane dimension wp.launch_tiled would append
        wp.launch(error, dim=dim, inputs=[self.act, self.target], outputs=[self.loss], block_dim=BLOCK)
        return self.loss


scenario = Tiles
