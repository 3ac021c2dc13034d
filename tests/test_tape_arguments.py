"""TapeArguments: the runner's per-pass view of a tape's kernel arguments, reused only while it is still true."""

from __future__ import annotations

import numpy as np
import warp as wp

from gradcheck.measure.stats import StatsPlan
from gradcheck.tape.tape_arguments import TapeArguments
from gradcheck.warp_compat import gradient_reader


@wp.struct
class Holder:
    values: wp.array(dtype=float)


@wp.kernel
def _square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel
def _from_struct(h: Holder, y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = h.values[i] * 2.0


def _record(x, y, holder=None):
    tape = wp.Tape()
    with tape:
        wp.launch(_square, dim=x.size, inputs=[x], outputs=[y], device="cpu")
        if holder is not None:
            wp.launch(_from_struct, dim=x.size, inputs=[holder], outputs=[y], device="cpu")
    return tape


def _arrays(n=4):
    x = wp.array(np.arange(n, dtype=np.float32), dtype=float, device="cpu", requires_grad=True)
    y = wp.zeros(n, dtype=float, device="cpu", requires_grad=True)
    return x, y


def test_same_objects_are_recognised_and_anything_else_reclassified():
    x, y = _arrays()
    holder = Holder()
    holder.values = x
    arguments = TapeArguments()
    assert arguments.update(_record(x, y, holder)) is False  # first pass: classified
    assert arguments.plain == [x, y] and arguments.struct_roots == [holder] and arguments.nested == [holder]
    assert arguments.update(_record(x, y, holder)) is True  # a new tape passing the same objects
    z = wp.zeros(4, dtype=float, device="cpu", requires_grad=True)
    assert arguments.update(_record(x, z, holder)) is False  # one argument differs
    assert arguments.plain == [x, z]
    assert arguments.update(_record(x, z)) is False  # fewer launches
    assert arguments.struct_roots == [] and arguments.nested == []


def test_plain_gradients_follow_a_replaced_grad_buffer():
    x, y = _arrays()
    arguments = TapeArguments()
    arguments.update(_record(x, y))
    by_key, grads = arguments.plain_gradients()
    assert grads == [x.grad, y.grad] and list(by_key.values()) == [x, y]
    assert arguments.plain_gradients()[1][0] is x.grad  # unchanged: the same answer
    x.grad = wp.zeros(4, dtype=float, device="cpu")  # the user swaps the buffer between passes
    assert arguments.update(_record(x, y)) is True  # the arguments themselves are the same objects
    by_key, grads = arguments.plain_gradients()
    assert grads[0] is x.grad and (x.grad.ptr << 64 | x.grad.size) in by_key
    y.grad = None  # no gradient any more: not a buffer to audit
    assert arguments.plain_gradients()[1] == [x.grad]


def test_gradient_reader_reads_what_the_property_returns():
    x, _ = _arrays()
    plain = wp.zeros(3, dtype=float, device="cpu")
    read = gradient_reader()
    assert read(x) is x.grad and read(plain) is plain.grad is None


def test_stats_plan_rebuilds_for_other_objects_and_rereads_the_same_ones():
    a = wp.array([1.0, 2.0], dtype=float, device="cpu")
    b = wp.array([3.0, 4.0, 5.0], dtype=float, device="cpu")
    plan = StatsPlan()
    assert [r.sumsq for r in plan.table([a, b]).rows()] == [5.0, 50.0]
    b.fill_(1.0)  # same objects: the rows are reused, the values read again
    assert [r.sumsq for r in plan.table([a, b]).rows()] == [5.0, 3.0]
    c = wp.array([2.0], dtype=float, device="cpu")
    assert [r.sumsq for r in plan.table([a, c]).rows()] == [5.0, 4.0]  # another object: rebuilt
    assert [r.sumsq for r in plan.table([a, c], [None, c]).rows()] == [5.0, 4.0]  # a reference added: rebuilt
    assert plan.table([a, c], [None, c]).row(1).differ == 0
