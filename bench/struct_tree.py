"""Synthetic struct tree for the audit-cost benchmark: 1,000 ``Cell`` structs x 10 array fields
(10,000 array fields, each with a gradient buffer) and a tape of 10,000 launches that take them."""

from __future__ import annotations

import warp as wp

FIELDS = 10


@wp.struct
class Inner:
    a: wp.array(dtype=float)
    b: wp.array(dtype=float)
    c: wp.array(dtype=float)
    d: wp.array(dtype=float)
    e: wp.array(dtype=float)


@wp.struct
class Cell:
    inner: Inner
    f: wp.array(dtype=float)
    g: wp.array(dtype=float)
    h: wp.array(dtype=float)
    i: wp.array(dtype=float)
    j: wp.array(dtype=float)


@wp.kernel
def touch(cell: Cell, out: wp.array(dtype=float)):
    out[0] = cell.inner.a[0] + cell.f[0]


class StructTree:
    def __init__(self, cells: int, launches: int, device: str = "cpu"):
        self.cells = []
        for _ in range(cells):
            inner = Inner()
            for name in "abcde":
                setattr(inner, name, wp.zeros(1, dtype=float, device=device, requires_grad=True))
            cell = Cell()
            cell.inner = inner
            for name in "fghij":
                setattr(cell, name, wp.zeros(1, dtype=float, device=device, requires_grad=True))
            self.cells.append(cell)
        self.out = wp.zeros(1, dtype=float, device=device, requires_grad=True)
        self.tape = wp.Tape()
        with self.tape:
            for k in range(launches):
                wp.launch(touch, dim=1, inputs=[self.cells[k % cells]], outputs=[self.out], device=device)
