"""backward_origin: the first backward launch that makes an adjoint NaN/Inf (or too large), on real Warp kernels."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import warp as wp

from gradcheck.diagnose.backward_origin import MAX_ENTRIES, backward_origin

DEVICE = "cpu"
N = 4


@wp.kernel
def double_minus(x: wp.array(dtype=float), a: wp.array(dtype=float)):
    i = wp.tid()
    a[i] = 2.0 * x[i] - 2.0  # exactly 0 where x == 1


@wp.kernel
def square_root(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    b[i] = wp.sqrt(a[i])  # finite at 0; its adjoint 0.5 / sqrt(0) is not


@wp.kernel
def total(b: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, b[i])


@wp.kernel
def step(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 10.0 * x[i]


@wp.kernel
def identity(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i]


@wp.kernel
def poison(g: wp.array(dtype=float)):
    g[wp.tid()] = wp.nan


@wp.struct
class State:
    v: wp.array(dtype=float)


@wp.kernel
def struct_root(s: State, b: wp.array(dtype=float)):
    i = wp.tid()
    b[i] = wp.sqrt(s.v[i])


def _site(marker: str) -> str:
    """``file:line`` of the line of this file that holds ``marker`` (the wp.launch the origin must point at)."""
    lines = Path(__file__).read_text().splitlines()
    line = next(n for n, text in enumerate(lines, 1) if marker in text and "wp.launch" in text)
    return f"{__file__}:{line}"


def _array(values, grad=True):
    return wp.array(np.asarray(values, dtype=np.float32), dtype=float, device=DEVICE, requires_grad=grad)


def _zeros(grad=True):
    return wp.zeros(N, dtype=float, device=DEVICE, requires_grad=grad)


def _bits(arrays) -> list[np.ndarray]:
    """Each array's bytes: equal bits, NaN payloads included."""
    return [a.numpy().copy().view(np.uint8) for a in arrays]


def _all_grads(tape, *extra) -> list:
    seen = {}
    for a in [*tape.gradients.values(), *(x.grad for x in extra)]:
        seen.setdefault(id(a), a)
    return list(seen.values())


def _max_probes(tape) -> int:
    return math.ceil(math.log2(len(tape.launches))) + 2


def _sqrt_chain(x_values, copy: bool = False):
    x = _array(x_values)
    a, b, loss = _zeros(), _zeros(), wp.zeros(1, dtype=float, device=DEVICE, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(double_minus, dim=N, inputs=[x], outputs=[a], device=DEVICE)
        if copy:
            a2 = _zeros()
            wp.copy(a2, a)
            a = a2
        wp.launch(square_root, dim=N, inputs=[a], outputs=[b], device=DEVICE)  # origin: sqrt
        wp.launch(total, dim=N, inputs=[b], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    return tape, x, loss


def test_sqrt_at_zero_is_named_and_gradients_stay_bit_identical():
    tape, x, loss = _sqrt_chain([3.0, 1.0, 2.0, 5.0])
    assert not np.isfinite(x.grad.numpy()).all()  # the symptom: only the final array is known bad
    grads = _all_grads(tape, x, loss)
    before, forward, gradients = _bits(grads), _bits([x]), dict(tape.gradients)

    origin = backward_origin(tape, loss)

    assert origin is not None
    assert (origin.index, origin.kernel) == (1, square_root.key)
    assert origin.site == _site("origin: sqrt")
    assert origin.array == f"{square_root.key}.a.grad"
    assert origin.value == 1.0  # one non-finite entry: the element at 0
    assert origin.incoming_finite
    assert (origin.step, origin.steps) == (1, 1)
    assert 0 < origin.probes <= _max_probes(tape)
    after = _bits(grads)
    assert all(np.array_equal(p, q) for p, q in zip(before, after))
    assert np.array_equal(forward[0], _bits([x])[0])
    assert tape.gradients == gradients


def test_rollout_growth_names_the_step_that_crosses_the_threshold():
    T, threshold = 20, 1e6
    xs = [_array(np.ones(N))] + [_zeros() for _ in range(T)]
    loss = wp.zeros(1, dtype=float, device=DEVICE, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for t in range(T):
            wp.launch(step, dim=N, inputs=[xs[t]], outputs=[xs[t + 1]], device=DEVICE)
        wp.launch(total, dim=N, inputs=[xs[T]], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    before = _bits(_all_grads(tape, *xs, loss))

    origin = backward_origin(tape, loss, kind="growth", threshold=threshold)

    # d loss / d x_T = 1 per entry; the backward of step t (launch t) makes ||x_t.grad|| = sqrt(N) * 10^(T - t):
    # the first launch in backward order past the threshold is the largest such t
    expected = max(t for t in range(T) if math.sqrt(N) * 10.0 ** (T - t) > threshold)
    assert origin is not None
    assert (origin.index, origin.kernel, origin.step, origin.steps) == (expected, step.key, expected + 1, T)
    assert origin.array == f"{step.key}.x.grad"
    assert origin.value == pytest.approx(math.sqrt(N) * 10.0 ** (T - expected), rel=1e-5)
    assert origin.incoming_finite
    assert origin.probes <= _max_probes(tape)
    assert all(np.array_equal(p, q) for p, q in zip(before, _bits(_all_grads(tape, *xs, loss))))
    # the same finite backward has no non-finite origin
    assert backward_origin(tape, loss) is None


def test_clean_chain_returns_none_and_leaves_gradients():
    tape, x, loss = _sqrt_chain([3.0, 4.0, 2.0, 5.0])
    grads = _all_grads(tape, x, loss)
    before = _bits(grads)
    assert backward_origin(tape, loss) is None
    assert all(np.array_equal(p, q) for p, q in zip(before, _bits(grads)))


def test_a_recorded_copy_on_the_tape_is_run_and_passed_over():
    tape, x, loss = _sqrt_chain([3.0, 1.0, 2.0, 5.0], copy=True)
    assert callable(tape.launches[1])  # wp.copy's recorded adjoint between the two kernels
    before = _bits(_all_grads(tape, x, loss))

    origin = backward_origin(tape, loss)

    assert origin is not None and (origin.index, origin.kernel) == (2, square_root.key)
    assert origin.site == _site("origin: sqrt")
    assert origin.probes <= _max_probes(tape)
    assert all(np.array_equal(p, q) for p, q in zip(before, _bits(_all_grads(tape, x, loss))))


def test_a_tape_with_a_record_func_of_the_programs_is_not_searched():
    """A record_func callback may do anything besides writing gradients (print, count, call torch): running it again
    would change what the program does, so the search does not run (Warp's own copy adjoints are fine, see above)."""
    x = _array(np.ones(N))
    y, loss = _zeros(), wp.zeros(1, dtype=float, device=DEVICE, requires_grad=True)
    calls = []

    def poisoning_hook():
        calls.append(1)
        wp.launch(poison, dim=N, inputs=[y.grad], device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(step, dim=N, inputs=[x], outputs=[y], device=DEVICE)
        tape.record_func(poisoning_hook, arrays=[y])
        wp.launch(total, dim=N, inputs=[y], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    assert len(calls) == 1 and np.isnan(x.grad.numpy()).all()
    before = _bits(_all_grads(tape, x, loss))

    assert backward_origin(tape, loss) is None
    assert len(calls) == 1  # the program's callback ran once, as under python
    assert all(np.array_equal(p, q) for p, q in zip(before, _bits(_all_grads(tape, x, loss))))


def test_struct_field_adjoint_is_named_and_restored():
    s = State()
    s.v = _array([0.0, 1.0, 4.0, 9.0])
    b, loss = _zeros(), wp.zeros(1, dtype=float, device=DEVICE, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(struct_root, dim=N, inputs=[s], outputs=[b], device=DEVICE)
        wp.launch(total, dim=N, inputs=[b], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    before = _bits([s.v.grad, b.grad, loss.grad])

    origin = backward_origin(tape, loss)

    assert origin is not None and origin.index == 0
    assert origin.array == f"{struct_root.key}.s.v.grad"
    assert all(np.array_equal(p, q) for p, q in zip(before, _bits([s.v.grad, b.grad, loss.grad])))


def test_gradients_are_restored_when_a_backward_raises(monkeypatch):
    from gradcheck.diagnose import backward_origin as module

    tape, x, loss = _sqrt_chain([3.0, 1.0, 2.0, 5.0])
    grads = _all_grads(tape, x, loss)
    before = _bits(grads)
    real, runs = module._Search.backward, []

    def fails_on_the_second(self, k):
        real(self, k)  # the first partial backward writes the gradient buffers, then the search fails
        runs.append(k)
        if len(runs) == 2:
            raise RuntimeError("boom")

    monkeypatch.setattr(module._Search, "backward", fails_on_the_second)
    with pytest.raises(RuntimeError, match="boom"):
        backward_origin(tape, loss)
    assert all(np.array_equal(p, q) for p, q in zip(before, _bits(grads)))


def test_grads_seed_and_bad_seed():
    tape, x, loss = _sqrt_chain([3.0, 1.0, 2.0, 5.0])
    origin = backward_origin(tape, grads={loss: _array([1.0])})
    assert origin is not None and origin.index == 1
    assert backward_origin(tape, grads={loss: _array([float("nan")])}) is None  # the seed itself is bad
    assert loss.grad.numpy()[0] == 1.0


def test_refusals():
    tape, x, loss = _sqrt_chain([3.0, 1.0, 2.0, 5.0])
    assert backward_origin(tape) is None  # no seed: nothing to reproduce
    with pytest.raises(ValueError):
        backward_origin(tape, loss, kind="growth")
    with pytest.raises(ValueError):
        backward_origin(tape, loss, kind="size")
    saved = tape.launches
    tape.launches = saved * (MAX_ENTRIES // len(saved) + 1)  # past the cap: not probed (nothing runs)
    try:
        assert backward_origin(tape, loss) is None
    finally:
        tape.launches = saved


def test_probe_count_is_logarithmic_on_a_long_tape():
    before_root, after_root = 60, 39
    xs = [_array([0.0, 1.0, 2.0, 3.0])] + [_zeros() for _ in range(before_root + after_root + 1)]
    loss = wp.zeros(1, dtype=float, device=DEVICE, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for t in range(len(xs) - 1):
            kernel = square_root if t == before_root else identity
            wp.launch(kernel, dim=N, inputs=[xs[t]], outputs=[xs[t + 1]], device=DEVICE)
        wp.launch(total, dim=N, inputs=[xs[-1]], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    origin = backward_origin(tape, loss)

    assert len(tape.launches) == 101
    assert origin is not None and (origin.index, origin.kernel) == (before_root, square_root.key)
    assert (origin.step, origin.steps) == (1, 1)
    assert origin.probes <= _max_probes(tape)
