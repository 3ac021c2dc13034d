"""Arrays of structs under exec: a trained array of all-float structs gets its gradient's statistics on the device
(warp_compat.float_view: the float fields, in place), as a float array does. Before, exec raised an internal error
("gradient statistics need a float16/32/64 array, got P") on the first audited backward."""

from __future__ import annotations

import numpy as np
import warp as wp
from conftest import TESTS, audited

from gradcheck.warp_compat import float_view

PROGRAM = TESTS / "programs" / "struct_gradients" / "trained_structs.py"


def test_a_trained_array_of_structs_is_measured_not_an_internal_error():
    result = audited(PROGRAM)
    assert not [f for f in result.findings if f.check == "internal-error"], result.findings
    (param,) = [p for p in result.params if p.subject == "ps.grad"]
    assert param.role == "updated"
    # never zeroed: the b fields' gradient adds 2 a backward (the a fields' stays 0), so the norm grows linearly,
    # by the same step (2 * sqrt(8)) each backward it was measured on
    steps = [b - a for a, b in zip(param.norms, param.norms[1:])]
    assert len(steps) >= 2 and all(abs(s - 2 * 8**0.5) < 1e-3 for s in steps), param.norms


@wp.struct
class Mixed:
    a: float
    n: int


@wp.struct
class Floats:
    a: float
    v: wp.vec3


def test_the_float_view_is_the_structs_memory():
    records = wp.zeros(4, dtype=Floats, device="cpu")
    view = float_view(records)
    assert view.dtype == wp.float32 and view.shape == (16,) and view.ptr == records.ptr
    view.numpy()[:] = np.arange(16)
    assert float_view(wp.zeros(4, dtype=Mixed, device="cpu")) is None
    assert float_view(wp.zeros(4, dtype=float, device="cpu")) is None
